"""The interpreter's values: the invocation grid, masks, choosing between values by a mask,
and WGSL's conversions.

A *value* is a numpy array whose first axis is the invocation axis: length ``N`` (one entry per
invocation of the dispatch) or length 1 (the same for every invocation, a *uniform* value, which
broadcasts). Scalars are 1-D ``[L]``, vectors 2-D ``[L, n]``. A fixed-size array value is a Python
list of element values (see :class:`ArrayValue`). Values are never mutated in place, so binding
one to a name never aliases.

A *mask* says which invocations execute a statement: ``None`` means all of them, otherwise a
bool array of length ``N``.

Memory (storage buffers, workgroup arrays) is :mod:`kvdsl.interp.buffers`; the strided index
sets loads and stores take as buffer views are :mod:`kvdsl.interp.indexsets`.
"""

from __future__ import annotations

import math

import numpy as np

from kvdsl.ir.types import Scalar, Vec

Mask = np.ndarray | None
COMPONENTS = "xyzw"


class ArrayValue(list):
    """A fixed-size array value: one value per element, each ``[L]`` or ``[L, n]``."""


# ---- the invocation grid ----------------------------------------------------------------------


class Grid:
    """The invocations of a dispatch, in WebGPU's order: workgroups with x fastest, then the local
    invocation index (``lid.x`` fastest) inside each workgroup.

    A grid may cover only the run ``[start, stop)`` of the dispatch's invocations (a *chunk*, see
    :meth:`chunks`), and the machine may drop invocations that have returned from the entry point
    (see :meth:`compact`): *lanes* then number the invocations still live, and ``ids`` maps each
    lane to its invocation's index in the full dispatch.
    """

    def __init__(
        self,
        workgroups: tuple[int, int, int],
        size: tuple[int, int, int],
        start: int = 0,
        stop: int | None = None,
        subgroup_size: int = 32,
    ) -> None:
        self.subgroup_size = subgroup_size
        self.workgroups = tuple(int(w) for w in workgroups)
        self.size = tuple(int(s) for s in size)
        self.per_group = self.size[0] * self.size[1] * self.size[2]
        self.total = self.per_group * self.workgroups[0] * self.workgroups[1] * self.workgroups[2]
        if self.total >= 2**31:
            raise ValueError(f"{self.total} invocations are more than the interpreter tracks")
        stop = self.total if stop is None else stop
        self.n = stop - start
        self.ids: np.ndarray | None = None
        self.offset = start  # with ids None, lane k is invocation offset + k
        self._lanes: np.ndarray | None = None
        self._orig: np.ndarray | None = None  # original(lanes), made when first needed
        self._cols: dict[tuple[str, int], np.ndarray] = {}

    def chunks(self, target: int):
        """Runs ``(start, stop)`` of whole workgroups covering the dispatch, about ``target``
        invocations each, none crossing a row of ``X`` workgroups (so ``wid.y`` and ``wid.z``
        are the same for every invocation of a run)."""
        row = self.workgroups[0]
        step = max(1, min(row, target // self.per_group)) if row else 1
        for r in range(self.workgroups[1] * self.workgroups[2]):
            for x in range(0, row, step):
                g0, g1 = r * row + x, r * row + min(row, x + step)
                yield g0 * self.per_group, g1 * self.per_group

    @property
    def lanes(self) -> np.ndarray:
        """``0 .. n-1``, made when first needed."""
        if self._lanes is None:
            self._lanes = np.arange(self.n, dtype=np.int64)
        return self._lanes

    def column(self, builtin: str, comp: int) -> np.ndarray:
        """Component ``comp`` of a compute builtin (``gid``, ``lid``, ``wid``, ``nwg``; ``sg``,
        the subgroup size, ``sgid``, ``nsg``, ``sgix`` and ``lidx``, the local index, have only
        component 0) as a u32 value; uniform (length 1) where every
        live invocation has the same component."""
        key = (builtin, comp)
        col = self._cols.get(key)
        if col is None:
            if builtin == "sg":
                col = np.array([self.subgroup_size], np.uint32)
            elif builtin == "sgid":  # subgroups are aligned runs of local indices
                local = self.original(self.lanes) % self.per_group
                col = (local % self.subgroup_size).astype(np.uint32)
            elif builtin == "sgix":  # the subgroup's index in its workgroup
                local = self.original(self.lanes) % self.per_group
                col = (local // self.subgroup_size).astype(np.uint32)
            elif builtin == "nsg":  # the last subgroup may be partial
                col = np.array([-(-self.per_group // self.subgroup_size)], np.uint32)
            elif builtin == "lidx":  # the local index: x fastest, as lid's components
                col = (self.original(self.lanes) % self.per_group).astype(np.uint32)
            elif builtin == "nwg":
                col = np.array([self.workgroups[comp]], np.uint32)
            elif self.ids is None and self.offset % self.per_group == self.n % self.per_group == 0:
                col = self._whole_groups(builtin, comp)
            elif builtin == "gid":
                wid, lid = self.column("wid", comp), self.column("lid", comp)
                col = wid * np.uint32(self.size[comp]) + lid
            else:
                col = self._part(builtin, comp)
            self._cols[key] = col
        return col

    def _whole_groups(self, builtin: str, comp: int) -> np.ndarray:
        # A run of whole workgroups is a [groups, per_group] table: the workgroup part varies
        # along rows, the local part along columns, so the column is one broadcast add.
        p = self.per_group
        groups = Grid(self.workgroups, (1, 1, 1), self.offset // p, (self.offset + self.n) // p)
        wid = groups._part("wid", comp) if builtin != "lid" else np.zeros(1, np.uint32)
        if builtin == "wid":
            return wid if wid.shape[0] == 1 else np.repeat(wid, p)
        lid = Grid((1, 1, 1), self.size)._part("lid", comp)
        if builtin == "gid":
            wid = wid * np.uint32(self.size[comp])
        if wid.shape[0] == 1 and lid.shape[0] == 1:
            return wid + lid
        table = wid[:, None] + lid[None, :]
        return np.broadcast_to(table, (self.n // p, p)).reshape(-1)

    def _part(self, builtin: str, comp: int) -> np.ndarray:
        # Invocation k is local index k % per_group of workgroup k // per_group; each is split
        # into components x fastest: component c is (k // step) % count.
        dims = self.size if builtin == "lid" else self.workgroups
        step = math.prod(dims[:comp]) * (self.per_group if builtin == "wid" else 1)
        count = dims[comp]
        lo, hi = self.offset, self.offset + self.n - 1
        if self.ids is not None:
            lo, hi = int(self.ids[0]), int(self.ids[-1])  # ids ascend
        if count == 1 or lo // step == hi // step:
            return np.array([lo // step % count], np.uint32)
        k = (
            self.ids.astype(np.uint32)
            if self.ids is not None
            else np.arange(lo, hi + 1, dtype=np.uint32)
        )
        q = k // np.uint32(step)
        return q - q // np.uint32(count) * np.uint32(count)

    def original(self, lanes):
        """The dispatch-wide invocation index of ``lanes``."""
        if self.ids is None:
            if lanes is self._lanes and self.offset:
                if self._orig is None:
                    self._orig = lanes + self.offset
                return self._orig
            return lanes + self.offset if self.offset else lanes
        return self.ids if lanes is self._lanes else self.ids[lanes]

    def compact(self, keep: np.ndarray | slice) -> None:
        """Keep only ``keep`` (lanes in the current numbering: an index array or a slice)."""
        if isinstance(keep, slice) and self.ids is None:
            self.offset += keep.start
            self.n = keep.stop - keep.start
        else:
            ids = self.ids if self.ids is not None else self.offset + np.arange(self.n)
            self.ids = ids[keep]
            self.n = len(self.ids)
        self._lanes = self._orig = None
        self._cols = {k: v if v.shape[0] == 1 else v[keep] for k, v in self._cols.items()}

    def writers(self, m) -> tuple | None:
        """The invocation ids of the lanes of ``m`` as ``(first, counts, steps)`` (see
        :meth:`kvdsl.interp.buffers.Storage.defer`), where they are a pattern."""
        if m is not None or self.ids is not None:
            return None
        return (self.offset, (self.n,), (1,))

    def describe(self, i: int) -> str:
        """``gid=(x, y, z)`` of invocation ``i`` (dispatch-wide), with its workgroup and local ids."""
        i = int(i)
        local, group = i % self.per_group, i // self.per_group
        (sx, sy, _), (wx, wy, _) = self.size, self.workgroups
        lid = (local % sx, local // sx % sy, local // (sx * sy))
        wid = (group % wx, group // wx % wy, group // (wx * wy))
        gid = tuple(w * s + x for w, s, x in zip(wid, self.size, lid))
        return f"invocation gid={gid} (workgroup {wid}, local {lid})"

    def active(self, m: Mask) -> np.ndarray:
        """The lanes of mask ``m``."""
        return self.lanes if m is None else np.flatnonzero(m)

    def lanes_of(self, invocations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(lane, found) for dispatch-wide invocation indices: the lane holding each, and whether
        it is live in this grid (where not, its lane is 0)."""
        if self.ids is None:
            lane = invocations - self.offset
            found = (lane >= 0) & (lane < self.n)
        else:
            lane = np.searchsorted(self.ids, invocations)
            found = lane < self.n
            found[found] = self.ids[lane[found]] == invocations[found]
        return np.where(found, lane, 0), found


# ---- masks ------------------------------------------------------------------------------------


def is_uniform(v: np.ndarray) -> bool:
    """Whether ``v`` holds one value for every invocation."""
    return v.shape[0] == 1


def m_and(m: Mask, c: np.ndarray, n: int) -> Mask:
    """Lanes of ``m`` where the bool value ``c`` holds."""
    if is_uniform(c) and n != 1:
        return m if c[0] else np.zeros(n, bool)
    return c if m is None else m & c


def m_andnot(m: Mask, c: np.ndarray, n: int) -> Mask:
    """Lanes of ``m`` where the bool value ``c`` does not hold."""
    if is_uniform(c) and n != 1:
        return np.zeros(n, bool) if c[0] else m
    return ~c if m is None else m & ~c


def m_or(a: Mask, b: Mask) -> Mask:
    if a is None or b is None:
        return None
    return a | b


def empty(m: Mask) -> bool:
    return m is not None and not m.any()


def normal(m: Mask) -> Mask:
    """``None`` for a mask holding every lane."""
    return None if m is not None and m.all() else m


def sel(m: Mask, new: np.ndarray, old: np.ndarray) -> np.ndarray:
    """``new`` on the lanes of ``m``, ``old`` elsewhere (element by element for arrays)."""
    if m is None:
        return new
    if type(new) is ArrayValue:  # an array of arrays: each inner one
        return ArrayValue(sel(m, a, b) for a, b in zip(new, old))
    mm = m.reshape(m.shape + (1,) * (max(new.ndim, old.ndim) - 1))
    return np.where(mm, new, old)


def merge(eff: np.ndarray, v, old):
    """``v`` on the lanes of ``eff``, ``old`` on the others: a scalar or vector value, an
    array's elements or a struct's members each so."""
    if type(v) is dict:
        return {k: merge(eff, v[k], old[k]) for k in v}
    if isinstance(v, ArrayValue):
        return ArrayValue(merge(eff, a, b) for a, b in zip(v, old))
    return sel(eff, v, old)


def broadcast(v: np.ndarray, n: int) -> np.ndarray:
    """``v`` with ``n`` lanes."""
    return v if v.shape[0] == n else np.broadcast_to(v, (n,) + v.shape[1:])


# ---- conversions ------------------------------------------------------------------------------

# Float → integer saturates: the float is clamped, in its own type, to the values that truncate
# into the target's range, then truncated. The bounds are the largest floats inside the range,
# which is what naga and Tint emit: i32(3e9f) == 2147483520 (2^31 - 128, the largest f32 below
# 2^31), u32(5e9f) == 4294967040; an f16 (at most 65504) converts exactly, its infinities become
# ±65504. WGSL leaves NaN → integer indeterminate; here it is 0.
_SATURATE = {
    ("f32", "i32"): (-(2.0**31), 2147483520.0),
    ("f32", "u32"): (0.0, 4294967040.0),
    ("f16", "i32"): (-65504.0, 65504.0),
    ("f16", "u32"): (0.0, 65504.0),
}


def convert(x: np.ndarray, ty: Scalar | Vec) -> np.ndarray:
    """WGSL's value conversion ``ty(x)`` (scalar or component-wise)."""
    dst = ty.scalar
    src_kind, dt = x.dtype.kind, dst.dtype
    if x.dtype == dt:
        return x
    if dst.name == "bool":
        return x != 0  # NaN is not zero: bool(NaN) is true
    if src_kind == "f" and dst.is_int:
        lo, hi = _SATURATE[("f16" if x.dtype == np.float16 else "f32", dst.name)]
        with np.errstate(invalid="ignore"):
            y = np.clip(np.where(np.isnan(x), x.dtype.type(0), x), lo, hi)
        return y.astype(dt)
    with np.errstate(over="ignore", invalid="ignore"):
        # int → int keeps the bits (wraps); int → float and f32 → f16 round to nearest even.
        return x.astype(dt)
