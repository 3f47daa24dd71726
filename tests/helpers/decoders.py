"""A format's decoder kernel against the reference's dequantised rows."""

from __future__ import annotations

import numpy as np

from kvdsl import interp
from kvdsl.reference import formats as fm


def assert_decodes_as_the_reference(kernel, fmt, inline: bool, d: int, n: int = 5) -> None:
    """``kernel`` (``rows``, ``side`` where the scales are aside, ``out``; ``count`` rows of
    ``d``) on the interpreter gives the reference's dequantised values of ``n`` random rows:
    bit for bit, or within 1e-6 for an asymmetric format (q * scale + zero, one rounding each)."""
    x = np.random.default_rng(11).uniform(-3, 3, (n, d)).astype(np.float32)
    words, side = fm.quantize_rows(fmt, x, inline)
    buffers = {"rows": words.reshape(-1), "out": np.full(n * d, np.nan, np.float32)}
    if not inline:
        buffers["side"] = side.reshape(-1)
    got = interp.run(kernel, buffers, {"count": n})["out"]
    want = fm.dequantize_rows(fmt, words, side, d, inline).reshape(-1)
    if fmt.asymmetric:
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
    else:
        assert np.array_equal(got, want)
