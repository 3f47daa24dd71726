"""Poisoning outputs and comparing them bit for bit or within a stated tolerance."""

from __future__ import annotations

import numpy as np

POISON_BITS = {4: 0x7FC0DEAD, 2: 0x7E5A}  # quiet NaNs with a payload; as ints, 0x7FC0DEAD


def poison(shape: tuple[int, ...] | int, dtype: np.dtype) -> np.ndarray:
    """An array whose every element is a recognisable value no kernel computes."""
    dtype = np.dtype(dtype)
    bits = np.full(shape, POISON_BITS[dtype.itemsize], dtype=f"u{dtype.itemsize}")
    return bits.view(dtype)


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
        stale = ~m & (_bits(got) != POISON_BITS[got.dtype.itemsize])
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
    """Quantised codes (int8 words or packed int4 nibbles) within one step, at most ``share`` off.

    A value computed with approximate builtins can land on the other side of a rounding
    boundary; more than one step, or more than ``share`` of the codes off, is a real difference.
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
    if worst > 1 or off > share:
        return float(worst), f"{off:.2%} of codes differ, by up to {worst} steps"
    return float(worst), ""
