"""Affine index sets: an index array recognised as ``lo + s0*k0 + s1*k1 + ...`` over nested
runs (:func:`affine`), so that a load or store through it is a strided view of the buffer
(:func:`strided`), a slice copy rather than a gather or scatter.
"""

from __future__ import annotations

import numpy as np

_PREFIX = 4096  # the first window searched for the end of an index array's first run
_RAMP = np.arange(_PREFIX, dtype=np.int64)
_LEVELS = 6  # deepest nesting of runs looked for

Shape = tuple[int, tuple[tuple[int, int], ...]]  # (lo, ((count, step), ...) outermost first)


def affine(i: np.ndarray, length: int) -> Shape | None:
    """``(lo, ((c0, s0), (c1, s1), ...))`` when the 1-D index array ``i`` is, in order,
    ``lo + s0*k0 + s1*k1 + ...`` for ``k0 < c0``, ``k1 < c1``, ... (the last level fastest), with
    every step positive, the indices provably distinct (each step larger than the span of the
    levels with smaller steps) and inside ``[0, length)``; else None.

    Such an index set is a strided view of the buffer: a load or store through it is a slice
    copy, not a gather or scatter. Most kernels' accesses are this shape (a contiguous run, one
    row per invocation, a run per workgroup, and in a batched loop the trips as one more level);
    the check costs a couple of passes over ``i``.
    """
    n = i.shape[0]
    if n < 2 or i.ndim != 1:
        return None
    lo = int(i[0])
    if lo < 0:
        return None
    step = int(i[1]) - lo
    if int(i[-1]) == lo + step * (n - 1) and step > 0 and lo + step * (n - 1) < length:
        # Most often one run: one pass to confirm it.
        if bool(((i - _ramp(i.dtype, n, step)) == i.dtype.type(lo)).all()):
            return (lo, ((n, step),))
    dims = _levels(i, lo, _LEVELS)
    if dims is None:
        return None
    span = 0
    for count, step in sorted(dims, key=lambda d: d[1]):
        if step <= span:
            return None  # levels could overlap (or run backwards)
        span += (count - 1) * step
    if lo + span >= min(length, 2**31):
        return None
    cols, step = dims[-1]
    across = _ramp(i.dtype, cols, step)
    if len(dims) == 1:
        return (lo, dims) if bool(((i - across) == i.dtype.type(lo)).all()) else None
    rows = n // cols
    grid = i.reshape(rows, cols)
    down = _start_of_rows(lo, dims[:-1]).astype(i.dtype)
    # A few rows' ends first, so that an index set that is not affine is rejected cheaply.
    k = min(rows, 16)
    probe = np.arange(k) * (rows - 1) // max(k - 1, 1)
    if not (
        (grid[probe, 0] == down[probe]).all()
        and (grid[probe, -1] == down[probe] + i.dtype.type(step * (cols - 1))).all()
    ):
        return None
    ok = bool(((grid - across) == down[:, None]).all())
    return (lo, dims) if ok else None


def _levels(i: np.ndarray, lo: int, depth: int) -> tuple[tuple[int, int], ...] | None:
    """The nested runs ``i`` would be made of if it is affine (not yet verified past the first
    run of each level)."""
    n = i.shape[0]
    step = int(i[1]) - lo
    if step <= 0 or depth == 0:
        return None
    pos, window, cols = 0, _PREFIX, n
    while pos < n:
        seg = i[pos : pos + window]
        ramp = _RAMP[: seg.shape[0]] if window == _PREFIX else np.arange(seg.shape[0])
        brk = np.flatnonzero(seg != lo + step * (pos + ramp))
        if brk.size:
            cols = pos + int(brk[0])
            break
        pos += seg.shape[0]
        window *= 4
    if cols == n:
        return ((n, step),)
    if n % cols:
        return None
    outer = _levels(i[::cols], lo, depth - 1)
    return None if outer is None else outer + ((cols, step),)


def _start_of_rows(lo: int, dims: tuple[tuple[int, int], ...]) -> np.ndarray:
    """``lo + s0*k0 + ...`` over the outer levels, flattened (int64)."""
    out = np.array([lo], np.int64)
    for count, step in dims:
        out = (out[:, None] + np.arange(count, dtype=np.int64) * step).reshape(-1)
    return out


_RAMPS: dict[tuple, np.ndarray] = {}


def _ramp(dtype: np.dtype, n: int, step: int) -> np.ndarray:
    """``step * arange(n)``, remembered: loops ask for the same few again and again."""
    key = (dtype, n, step)
    r = _RAMPS.get(key)
    if r is None:
        if len(_RAMPS) > 64:
            _RAMPS.clear()
        r = _RAMPS[key] = np.arange(n, dtype=dtype) * dtype.type(step)
    return r


def counts(shape: Shape) -> tuple[int, ...]:
    """The extent of each level of an affine index set: the lanes' values reshaped to it."""
    return tuple(c for c, _ in shape[1])


def strided(data: np.ndarray, shape: Shape) -> np.ndarray:
    """The ``[c0, c1, ..., ...]`` view of ``data`` at the index set :func:`affine` found."""
    lo, dims = shape
    s0 = data.strides[0]
    return np.lib.stride_tricks.as_strided(
        data[lo:],
        tuple(c for c, _ in dims) + data.shape[1:],
        tuple(st * s0 for _, st in dims) + data.strides[1:],
    )
