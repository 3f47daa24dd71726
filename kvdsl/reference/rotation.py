"""The Walsh-Hadamard rotation of a cache row, in numpy: what a rotated cache means.

A rotated format quantises ``R x`` instead of the row ``x``, where ``R = H diag(s)``: ``s`` a
fixed vector of signs (+1 or -1, one per dimension: :func:`signs`; all +1 unsigned) and ``H``
the orthonormal Walsh-Hadamard matrix in Sylvester's order (``H[i, j] = (-1)^popcount(i & j) /
sqrt(n)``), over the whole row or over each block of ``block`` dimensions. ``R`` is orthonormal,
so ``(R q) . (R k) = q . k``: attention over a rotated cache takes the query rotated by the same
``R`` and rotates its output back by ``R^T`` (``unrotate``), and equals attention over the cache
unrotated up to quantisation. The rotation spreads a few large channels over the whole row (or
block), which is what lets a 4-bit code keep the rest.

The transform is the fast one (``log2(n)`` butterfly stages, the order a kernel computes in),
in float64 unless the input is float32, in which case it runs in float32 as a kernel would.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Rotation:
    """``R = H diag(signs)`` over blocks of ``block`` dimensions of ``dim``-element rows."""

    dim: int
    block: int
    signs: np.ndarray  # [dim] of +1.0 / -1.0

    def rotate(self, x: np.ndarray) -> np.ndarray:
        """``R x`` for each row of ``x`` ``[..., dim]``: the signs and ``1 / sqrt(block)`` as
        one factor first, then the butterflies (the order a kernel computes in, so float32
        rows give a kernel's bits)."""
        x = _rows(x, self.dim)
        scale = x.dtype.type(1 / np.sqrt(self.block))
        return _butterflies(x * (self.signs.astype(x.dtype) * scale), self.block)

    def unrotate(self, y: np.ndarray) -> np.ndarray:
        """``R^T y`` (``H`` is symmetric and its own inverse): ``unrotate(rotate(x)) == x``."""
        y = _rows(y, self.dim)
        scale = y.dtype.type(1 / np.sqrt(self.block))
        return _butterflies(y * scale, self.block) * self.signs.astype(y.dtype)


def signs(n: int) -> np.ndarray:
    """The signs of dimensions ``0 .. n - 1``: dimension ``i``'s is -1 where bit 31 of
    ``h(i)`` is set, ``h`` an integer hash in u32 arithmetic (wrapping): ``x = (i + 1) *
    0x9E3779B1; x ^= x >> 15; x *= 0x2C1B3C6D; x ^= x >> 12``. A kernel computes the same from
    the index, with no table."""
    x = ((np.arange(n, dtype=np.uint64) + 1) * 0x9E3779B1) & 0xFFFFFFFF
    x ^= x >> 15
    x = (x * 0x2C1B3C6D) & 0xFFFFFFFF
    x ^= x >> 12
    return np.where((x >> 31) & 1, -1.0, 1.0)


def rotation(dim: int, block: int | None = None, signed: bool = True) -> Rotation:
    """The rotation of ``dim``-element rows over blocks of ``block`` (the whole row when None),
    with :func:`signs` (every sign +1 when not ``signed``)."""
    block = dim if block is None else block
    for name, n in (("dim", dim), ("block", block)):
        if not isinstance(n, int) or n < 2 or n & (n - 1):
            raise ValueError(f"rotation: {name}={n!r}: expected a power of two, at least 2")
    if dim % block:
        raise ValueError(f"rotation: block={block}: expected a divisor of dim={dim}")
    return Rotation(dim, block, signs(dim) if signed else np.ones(dim))


def fwht(x: np.ndarray, block: int) -> np.ndarray:
    """The orthonormal Walsh-Hadamard transform of each ``block`` of the last axis of ``x``: its
    butterfly stages (``a + b``, ``a - b`` at distance 1, 2, 4, ...), then ``1 / sqrt(block)``."""
    y = _butterflies(x, block)
    return y * y.dtype.type(1 / np.sqrt(block))


def _butterflies(x: np.ndarray, block: int) -> np.ndarray:
    """The unscaled stages of :func:`fwht`."""
    lead, n = x.shape[:-1], x.shape[-1]
    y = np.array(x, copy=True).reshape(-1, n // block, block)
    h = 1
    while h < block:
        y = y.reshape(y.shape[0], y.shape[1], block // (2 * h), 2, h)
        a, b = y[:, :, :, 0, :], y[:, :, :, 1, :]
        y = np.stack([a + b, a - b], axis=3)
        h *= 2
    return y.reshape(*lead, n)


def hadamard(n: int) -> np.ndarray:
    """The orthonormal ``n x n`` Walsh-Hadamard matrix in Sylvester's order (float64), from its
    definition ``(-1)^popcount(i & j) / sqrt(n)``: the fast transform's check."""
    i = np.arange(n)
    parity = np.vectorize(lambda v: bin(v).count("1") & 1)(i[:, None] & i[None, :])
    return np.where(parity, -1.0, 1.0) / np.sqrt(n)


def _rows(x: np.ndarray, dim: int) -> np.ndarray:
    x = np.asarray(x)
    if x.shape[-1:] != (dim,):
        raise ValueError(f"rotation: rows of {x.shape[-1] if x.ndim else 0} values: expected {dim}")
    return x if x.dtype == np.float32 else x.astype(np.float64)
