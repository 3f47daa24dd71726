"""How an output is held to an oracle, and the random inputs it is held on.

Inputs are random and never zero (:func:`values`), so that a kernel reading the wrong element, or
none, cannot agree with the oracle by chance. Outputs start poisoned (:func:`poison`: a quiet NaN
with a payload no kernel computes), so that an element a kernel fails to write, or writes but
should not, shows. An output is then compared with the oracle's (the reference, the interpreter,
another run): bit for bit or within a stated tolerance (:func:`compare`), quantised codes within
one step in a few elements (:func:`compare_quantized`), a dense format's packed rows by their
codes and scales (:func:`compare_rows`). The tolerances that the verification cases
(:mod:`kvdsl.harness`) and the sessions (:mod:`kvdsl.session`) share are stated here.

numpy and :mod:`kvdsl.reference.formats` alone, so that both can import it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kvdsl.reference import formats as fm

POISON_BITS = {4: 0x7FC0DEAD, 2: 0x7E5A}  # quiet NaNs with a payload; as ints, 0x7FC0DEAD
#: Relative tolerance of a stored scale where codes may move (:func:`compare_rows`): a few f32
#: ulps, or one f16 ulp (ggml's scales, rounded from an f32 that may be an ulp apart).
SCALE_TOL = {"f32": 2.0**-18, "f16": 2.0**-10}  # 32 f32 ulps; one f16 ulp
#: f32 attention outputs and partials against the reference (and the GPU against the
#: interpreter), relative to ``1 + |x|``: ``exp`` and ``tanh`` are approximate on a GPU, and the
#: f32 dot products and sums round; outputs are weighted means of values below 2.
ATTENTION_TOL = 5e-5
#: f16 attention outputs: half precision's rounding (2^-11 relative) and :data:`ATTENTION_TOL`.
ATTENTION_F16_TOL = 1e-3


def values(rng: np.random.Generator, shape: tuple[int, ...] | int, dtype: Any) -> np.ndarray:
    """Random non-zero values of ``dtype``: floats in ±[0.25, 2), integers over their full range."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        mag = rng.uniform(0.25, 2.0, shape)
        return (mag * rng.choice([-1.0, 1.0], shape)).astype(dtype)
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, shape, dtype=np.int64, endpoint=True).astype(dtype)
    return np.where(x == 0, dtype.type(1), x)


def poison(shape: tuple[int, ...] | int, dtype: np.dtype) -> np.ndarray:
    """An array whose every element is a recognisable value no kernel computes."""
    dtype = np.dtype(dtype)
    bits = np.full(shape, POISON_BITS[dtype.itemsize], dtype=f"u{dtype.itemsize}")
    return bits.view(dtype)


def holds_poison(a: np.ndarray) -> np.ndarray:
    """Which elements of ``a`` (flat) hold :func:`poison`'s value (none, where its element size
    has no poison)."""
    a = np.ascontiguousarray(a).reshape(-1)
    bits = POISON_BITS.get(a.dtype.itemsize)
    return np.zeros(a.shape, bool) if bits is None else _bits(a) == bits


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.view(f"u{a.dtype.itemsize}")


def compare(
    got: np.ndarray, want: np.ndarray, tol: float = 0.0, mask: np.ndarray | None = None
) -> tuple[float, str]:
    """``(max error, problem)``: bit-exact where ``tol == 0``, else ``|got - want| <= tol * (1 + |want|)``.

    With ``mask``, elements outside it must still hold the poison. ``problem`` is '' when the
    arrays agree, else a one-line description of the first disagreement.
    """
    got = np.asarray(got).reshape(-1)
    want = np.asarray(want, dtype=got.dtype).reshape(-1)
    if got.shape != want.shape:
        return float("inf"), f"shape {got.shape} != expected {want.shape}"
    m = np.ones(got.shape, bool) if mask is None else np.asarray(mask).reshape(-1)
    if mask is not None:
        stale = ~m & ~holds_poison(got)
        if stale.any():
            i = int(np.flatnonzero(stale)[0])
            return float("inf"), f"element {i} was written but should not be ({got[i]!r})"
    if tol == 0 or got.dtype.kind in "iu":
        bad = m & (_bits(got) != _bits(want))
        err = 0.0
        if got.dtype.kind == "f":
            with np.errstate(all="ignore"):
                diff = np.abs(got[m].astype(np.float64) - want[m].astype(np.float64))
            err = float(np.nanmax(diff)) if diff.size else 0.0
        elif m.any():
            err = float(np.max(np.abs(got[m].astype(np.int64) - want[m].astype(np.int64))))
    else:
        g, w = got.astype(np.float64), want.astype(np.float64)
        with np.errstate(all="ignore"):
            diff = np.abs(g - w)
        bad = m & ~(diff <= tol * (1 + np.abs(w)))
        err = float(np.nanmax(np.where(m, diff, 0))) if m.any() else 0.0
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        return (
            max(err, 0.0),
            f"{int(bad.sum())} elements differ, first at {i}: {got[i]!r} != {want[i]!r}",
        )
    return err, ""


def compare_quantized(
    got: np.ndarray,
    want: np.ndarray,
    bits: int,
    mask: np.ndarray | None = None,
    share: float = 0.01,
) -> tuple[float, str]:
    """Quantised codes (int8 words or packed int4 nibbles) within one step, at most ``share`` of
    them off (one code at the least).

    A value computed with approximate builtins can land on the other side of a rounding
    boundary (NVIDIA's f32 division moves a code or two in thousands); more than one step, or
    more codes off than ``share`` of them and more than one, is a real difference. One code is
    allowed whatever the count, as a small case (a row of 64 codes) may meet one such boundary.
    """
    err, problem = compare(got, want, 0.0, mask)
    if not problem or err == float("inf"):
        return err, problem
    g, w = np.asarray(got).reshape(-1), np.asarray(want, dtype=np.asarray(got).dtype).reshape(-1)
    m = np.ones(g.shape, bool) if mask is None else np.asarray(mask).reshape(-1)
    g, w = g[m], w[m]
    if bits == 2:  # 16 codes to a u32, as KIVI packs them
        shifts = np.arange(0, 32, 2, dtype=np.uint32)
        g = ((g.astype(np.uint32)[:, None] >> shifts) & 0x3).astype(np.int64).reshape(-1)
        w = ((w.astype(np.uint32)[:, None] >> shifts) & 0x3).astype(np.int64).reshape(-1)
    elif bits == 4:
        shifts = np.array([0, 4], np.uint32)
        g = ((g.astype(np.uint32)[:, None] >> shifts) & 0xF).astype(np.int64).reshape(-1)
        w = ((w.astype(np.uint32)[:, None] >> shifts) & 0xF).astype(np.int64).reshape(-1)
    diff = np.abs(g.astype(np.int64) - w.astype(np.int64))
    worst, off = int(diff.max()), float(np.mean(diff > 0))
    if worst > 1 or (off > share and np.count_nonzero(diff) > 1):
        return float(worst), f"{off:.2%} of codes differ, by up to {worst} steps"
    return float(worst), ""


def compare_rows(
    got: np.ndarray, want: np.ndarray, mask: np.ndarray | None, fmt: Any, d: int, inline: bool
) -> tuple[float, str]:
    """Written rows of ``got`` against ``want``, cache rows of ``d`` elements of the dense format
    ``fmt`` (its scales inline or not), taken apart (:func:`kvdsl.reference.formats.row_fields`):
    codes within one step in a few elements (:func:`compare_quantized`), scales within
    :data:`SCALE_TOL`. ``mask`` marks the written elements (default: every row)."""
    n = fm.row_words(fmt, d, inline)
    g, w = got.reshape(-1, n), np.asarray(want, np.uint32).reshape(-1, n)
    rows = np.ones(len(g), bool) if mask is None else np.asarray(mask).reshape(-1, n)[:, 0]
    (gs, gc), (ws, wc) = fm.row_fields(fmt, g[rows], d, inline), fm.row_fields(
        fmt, w[rows], d, inline
    )
    err, problem = compare_quantized(gc.reshape(-1), wc.reshape(-1), 8)
    with np.errstate(all="ignore"):
        rel = np.abs(gs.astype(np.float64) - ws) / np.maximum(np.abs(ws), 1e-30)
    tol = SCALE_TOL["f16" if fm.is_ggml(fmt) else "f32"]
    bad = ~(rel <= tol) & ~(gs == ws) & ~(np.isnan(gs) & np.isnan(ws))  # moved words: NaN too
    if bad.any():
        i = tuple(np.argwhere(bad)[0])
        return err, f"{int(bad.sum())} scales differ, first {gs[i]!r} != {ws[i]!r}"
    return err, problem
