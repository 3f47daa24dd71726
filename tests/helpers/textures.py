"""What the texture tests (``tests/frontend/test_*texture*.py``) share: the entry point of their
64-wide kernels and the refused kernel around a body, the backends they run on, the index
buffer and poisoned output they give, the checks of a text (it reads back from its print; Tint
and naga take it and its print; kvdsl refuses what WGSL refuses in its own words and Tint in
Tint's) and numpy's bilinear footprint: the four texels a gather reads, in WGSL's order."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import interp, runtime
from kvdsl.emit import emit
from kvdsl.frontend import WgslTypeError, parse
from kvdsl.ir import Kernel
from kvdsl.runtime import tint_check
from tests.helpers.wgsl import refused_by_compilers

#: The entry point of a kernel of 64 invocations a workgroup, up to its opening brace.
ENTRY = "@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"

#: The backends a test runs on, by the names ``tests.helpers.backends.backend_run`` takes.
BACKENDS = ("interp", "gpu")

#: The corners of a footprint in WGSL's gather order: (umin, vmax), (umax, vmax), (umax, vmin),
#: (umin, vmin), as (u, v) steps from its first texel.
GATHER_ORDER = ((0, 1), (1, 1), (1, 0), (0, 0))


def run_of(backend: str):
    """``run`` of the backend ``backend`` names ("interp" or "gpu"), without asking for the
    ``gpu`` fixture: for the tests of a host array both backends refuse."""
    return (interp if backend == "interp" else runtime).run


def refused_kernel(head: str, body: str, value: str = "1.0") -> str:
    """A module of the declarations ``head`` whose entry point binds ``i`` to ``gid.x``, runs
    ``body`` and stores ``value`` at ``out[i]``."""
    return head + ENTRY + "  let i = gid.x;\n" + body + f"\n  out[i] = {value};\n}}\n"


def read_back(text: str) -> Kernel:
    """The IR of ``text``, having asserted that kvdsl's print of it reads back to the same IR."""
    k = parse(text)
    assert parse(emit(k)) == k
    return k


def assert_compilers_take_it_and_its_print(text: str) -> None:
    """Neither Tint nor naga refuses ``text`` or kvdsl's print of it."""
    assert refused_by_compilers({"text": text, "printed": emit(parse(text))}) == {}


def assert_refused_in_words(name: str, text: str, ours: str, tints: str) -> None:
    """kvdsl refuses ``text`` (read as ``name``.wgsl) with a ``WgslTypeError`` that holds the
    words ``ours``, and Tint refuses it in words that hold ``tints``."""
    with pytest.raises(WgslTypeError) as err:
        parse(text, f"{name}.wgsl")
    assert ours in str(err.value)
    assert tints in tint_check({name: text})[name]


def footprint(u0: np.ndarray, v0: np.ndarray, width: int, height: int) -> list[tuple]:
    """The (x, y) of the four texels a bilinear filter reads from the texel (``u0``, ``v0``)
    (``floor(u * size - 0.5)``) and the next along each axis, each clamped to the edge of a
    ``width`` x ``height`` texture, in WGSL's gather order."""
    u = np.clip(u0, 0, width - 1), np.clip(u0 + 1, 0, width - 1)
    v = np.clip(v0, 0, height - 1), np.clip(v0 + 1, 0, height - 1)
    return [(u[du], v[dv]) for du, dv in GATHER_ORDER]


def indices_and_poison(rng: np.random.Generator, n: int, out_shape) -> dict[str, np.ndarray]:
    """The buffers ``a``, ``n`` random non-zero u32 below 2^20 that a kernel takes each
    invocation's coordinates from, and ``out``, its f32 output of ``out_shape`` poisoned with
    NaN so that an element left unwritten fails."""
    return {
        "a": rng.integers(1, 1 << 20, n, dtype=np.uint32),
        "out": np.full(out_shape, np.nan, np.float32),
    }
