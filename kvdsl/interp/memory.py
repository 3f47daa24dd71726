"""Memory access: loads and stores of storage bindings and workgroup memory, with the bounds
checks, the record of who wrote (and, in workgroup memory, read) each element that the race
checks consult, and ``workgroupBarrier()``.

See :mod:`kvdsl.interp` (Storage buffers; Workgroup memory and barriers) for the semantics.
"""

from __future__ import annotations

import numpy as np

from kvdsl.interp.atomics import atomic_sequence
from kvdsl.interp.batch import Fallback
from kvdsl.interp.errors import InterpError, OutOfBounds, RaceError, UninitializedRead
from kvdsl.interp.races import StorageRaces
from kvdsl.interp.textures import TextureAccess
from kvdsl.ir.tree import AtomicCall, Deref, Expr, Index, Name
from kvdsl.ir.types import Vec, held_as_words
from kvdsl.interp.buffers import SharedArray, Storage
from kvdsl.interp.indexsets import affine, counts, strided
from kvdsl.interp.values import ArrayValue, Mask, broadcast, is_uniform


class Flat:
    """The index of element ``[row][col]`` of a workgroup array of arrays (held flat)."""

    __slots__ = ("row", "col")

    def __init__(self, row: Expr, col: Expr) -> None:
        self.row, self.col = row, col


class Row:
    """The index of row ``[row]`` of a workgroup array of arrays, taken whole."""

    __slots__ = ("row",)

    def __init__(self, row: Expr) -> None:
        self.row = row


class Strided:
    """A load's elements left in the buffer: ``view`` (a strided view, one axis per level of
    the index set, then the element's components) holds the lanes' elements in lane order. Only
    a store takes one, copying view to view where the shapes allow."""

    __slots__ = ("view", "n", "levels")

    def __init__(self, view: np.ndarray, n: int, levels: int) -> None:
        self.view, self.n, self.levels = view, n, levels

    def array(self) -> np.ndarray:
        """The value as an ordinary ``[n, ...]`` array (a copy)."""
        return self.view.reshape((self.n,) + self.view.shape[self.levels :])


def _put(dst: np.ndarray, v: np.ndarray, lazy: Strided | None) -> None:
    """Write the lanes' values ``v`` (or ``lazy``'s view) over the strided view ``dst``."""
    if lazy is not None:
        try:
            np.reshape(dst, lazy.view.shape, copy=False)[...] = lazy.view
            return
        except ValueError:
            pass
        try:
            dst[...] = np.reshape(lazy.view, dst.shape, copy=False)
            return
        except ValueError:
            v = lazy.array()
    dst[...] = v.reshape(dst.shape) if len(v) > 1 else v


class Memory(StorageRaces, TextureAccess):
    """The machine's memory accesses, a mixin of :class:`kvdsl.interp.machine.Machine`, which
    holds the state they use: ``grid``, ``n``, ``shared``, ``strict_init``, ``batch``,
    ``_probe``, ``_affine`` and ``where()`` for messages."""

    # ---- bounds --------------------------------------------------------------------------
    def _first_bad(self, bad: np.ndarray) -> int:
        return int(np.flatnonzero(bad)[0]) if bad.shape[0] > 1 else 0

    def _oob(self, what: str, idx: np.ndarray, length: int, m: Mask) -> None:
        """Raise :class:`OutOfBounds` if an active lane's index is outside ``[0, length)``."""
        if is_uniform(idx):
            i = int(idx[0])
            if 0 <= i < length:
                return
            lane = int(self.grid.active(m)[0])
        else:
            if m is None:
                ok = int(idx.max()) < length and (idx.dtype.kind == "u" or int(idx.min()) >= 0)
                if ok:
                    return
            bad = idx >= length if idx.dtype.kind == "u" else (idx < 0) | (idx >= length)
            if m is not None:
                bad &= m
                if not bad.any():
                    return
            lane = self._first_bad(bad)
            i = int(idx[lane])
        raise OutOfBounds(
            f"{what}[{i}] is out of bounds (length {length}) for "
            f"{self.grid.describe(self.grid.original(lane))}{self.where()}"
        )

    # ---- textures ------------------------------------------------------------------------
    def _count(self, b: Storage, m: Mask, which: int) -> None:
        """Add the bytes the lanes of ``m`` load (``which`` 0) or store (1) to
        :attr:`accesses`, when it is kept: each active lane moves one element."""
        if self.accesses is not None:
            lanes = self.n if m is None else int(np.count_nonzero(m))
            tally = self.accesses.setdefault(b.binding.name, [0, 0])
            elem = b.binding.elem  # a struct's members move word by word
            tally[which] += lanes * (b.data.dtype.itemsize if held_as_words(elem) else elem.size)

    def store(self, b: Storage, idx: np.ndarray, v: np.ndarray, m: Mask) -> None:
        """``binding[idx] = v`` on the lanes of ``m``, checking bounds and races."""
        name = b.binding.name
        if b.split is not None:  # each component a scalar of its own
            if not self._inside(idx, b.length, m):
                self._oob(name, idx, b.length, m)
            v = v.array() if isinstance(v, Strided) else v
            for k, at in enumerate(self._component_indices(b, idx)):
                self.store(b.split, at, v[..., k], m)
            return
        self._count(b, m, 1)
        if not self._inside(idx, b.length, m):
            self._oob(name, idx, b.length, m)
        lazy = v if isinstance(v, Strided) else None
        if self._probe is True and self.batch is not None:
            self._probe = self.batch.best_inner(idx)
        if m is None and b.owner is None and b.reads is None and idx.shape[0] > 1:
            shape = self.affine(idx, b.length)
            writers = self.grid.writers(m) if shape is not None else None
            if writers is not None and b.defer(shape, writers, self.sync.stmt(self.current)):
                # Distinct elements no other store has touched: who wrote them is recorded as
                # a pattern, entered in the owner array only if something needs it.
                _put(strided(b.data, shape), v, lazy)
                return
        if lazy is not None:
            v = lazy.array()
        active = self.grid.active(m)
        lanes = self.grid.original(active)
        owner = b.owners()
        if is_uniform(idx) and len(lanes) > 1:
            if self.batch is not None:
                raise Fallback(f"{name}: one element stored on several trips")
            self._race_pair(name, int(idx[0]), int(lanes[0]), int(lanes[1]), "write")
        i = idx if is_uniform(idx) or m is None else idx[active]
        val = v if is_uniform(v) or m is None else v[active]
        self.check_after_read(b, i, lanes)
        shape = self.affine(i, b.length) if len(i) > 1 else None
        if shape is not None:
            # Distinct indices in a strided pattern: views instead of gathers and scatters.
            dims = counts(shape)
            prev = strided(owner, shape)
            if prev.max() >= 0:
                self._check_owner(b, prev.reshape(-1), i, lanes)
            prev[...] = lanes.reshape(dims)
            strided(b.wstmt, shape)[...] = self.sync.stmt(self.current)
            if b.wfence is not None:
                strided(b.wfence, shape)[...] = -1
            _put(strided(b.data, shape), val, None)
            return
        rising = len(i) == 1 or bool((i[1:] > i[:-1]).all())
        if not rising and self.batch is not None and np.unique(i).size != i.size:
            raise Fallback(f"{name}: one element stored on several trips")
        prev = owner[i]
        if prev.max() >= 0:
            self._check_owner(b, prev, i, lanes)
        owner[i] = lanes
        b.wstmt[i] = self.sync.stmt(self.current)
        if b.wfence is not None:
            b.wfence[i] = -1
        if not rising:
            # Repeated indices within this store: the owner that stuck is not every writer's.
            back = owner[i]
            dup = back != lanes
            if dup.any():
                j = self._first_bad(dup)
                self._race_pair(name, int(i[j]), int(back[j]), int(lanes[j]), "write")
        b.data[i] = val

    def store_component(self, b: Storage, idx: np.ndarray, lane: np.ndarray, v, m: Mask) -> None:
        """``binding[idx][lane] = v`` (``out[i].y = v``) on the lanes of ``m``: one scalar of a
        vector element, bounds and races checked on that scalar alone."""
        self._lane_at(b, idx, lane, m)
        self.store(b.components(), self._component_index(b, idx, lane), v, m)

    def _vector_buffer(self, name: str) -> Storage | None:
        """The read_write binding ``name`` where its elements are vectors (an array of them)
        and no local takes its name, else None: the bindings whose components race apart."""
        b = self.buffers.get(name)
        if b is None or b.binding.whole or b.binding.access != "read_write":
            return None
        return b if isinstance(b.binding.elem, Vec) and not self._shadowed(name) else None

    def load_component(self, b: Storage, idx: np.ndarray, lane: np.ndarray, m: Mask):
        """``binding[idx][lane]`` (``out[i].y``) on the lanes of ``m``, read as one scalar."""
        self._lane_at(b, idx, lane, m)
        return self.load(b.components(), self._component_index(b, idx, lane), m)

    def _lane_at(self, b: Storage, idx: np.ndarray, lane: np.ndarray, m: Mask) -> None:
        if not self._inside(idx, b.length, m):
            self._oob(b.binding.name, idx, b.length, m)
        self._oob(f"{b.binding.name}[]", lane, b.binding.elem.n, m)

    @staticmethod
    def _component_index(b: Storage, idx: np.ndarray, lane: np.ndarray) -> np.ndarray:
        return idx.astype(np.int64) * np.int64(b.binding.elem.n) + lane.astype(np.int64)

    @staticmethod
    def _component_indices(b: Storage, idx: np.ndarray) -> list[np.ndarray]:
        n = np.int64(b.binding.elem.n)
        base = idx.astype(np.int64) * n
        return [base + np.int64(k) for k in range(b.binding.elem.n)]

    def _inside(self, idx: np.ndarray, length: int, m: Mask) -> bool:
        """Whether every lane's index is known inside ``[0, length)`` without a bounds pass: an
        affine index set is (the access asks :meth:`affine` next, which remembers it)."""
        return m is None and idx.shape[0] > 1 and self.affine(idx, length) is not None

    def affine(self, idx: np.ndarray, length: int):
        """:func:`affine` of ``idx``, remembered for the last few arrays (``buf[e] = src[e]``
        asks twice about one, ``a[i] = x[j]; b[i] = y[j]`` four times about two)."""
        for last, n, shape in self._affine:
            if idx is last and n == length:
                return shape
        shape = affine(idx, length)
        self._affine = [(idx, length, shape)] + self._affine[:3]
        return shape

    def load(self, b: Storage, idx: np.ndarray, m: Mask, view: bool = False):
        """``binding[idx]`` on the lanes of ``m`` (other lanes get any element); with ``view``,
        a read-only binding's strided elements may come back as a :class:`Strided` instead."""
        if b.split is not None:  # each component a scalar of its own
            if not self._inside(idx, b.length, m):
                self._oob(b.binding.name, idx, b.length, m)
            for at in self._component_indices(b, idx):
                self.load(b.split, at, m)
            return np.take(b.data, idx, axis=0, mode="clip")
        self._count(b, m, 0)
        if not self._inside(idx, b.length, m):
            self._oob(b.binding.name, idx, b.length, m)
        if b.binding.access == "read_write":
            self.read_access(b, idx, m)
        if is_uniform(idx):
            return b.data[int(idx[0]) : int(idx[0]) + 1].copy()
        shape = self.affine(idx, b.length)
        if shape is not None:
            if view and b.binding.access == "read":
                return Strided(strided(b.data, shape), idx.shape[0], len(shape[1]))
            v = strided(b.data, shape).reshape(idx.shape + b.data.shape[1:])
            return v.copy() if b.binding.access == "read_write" else v
        return np.take(b.data, idx, axis=0, mode="clip")

    # ---- workgroup memory ----------------------------------------------------------------
    def _shared_at(self, w: SharedArray, idx: np.ndarray, m: Mask, lane: np.ndarray | None):
        """Active lanes, their dispatch-wide invocation ids, flat element positions in ``w``,
        and the slots the access touches with the invocation id of each (a whole vector element
        touches all of its lanes' slots; ``lane`` picks one)."""
        self._oob(w.var.name, idx, w.length, m)
        active = self.grid.active(m)
        ids = self.grid.original(active)
        i = broadcast(idx, self.n)[active].astype(np.int64)
        flat = (ids // self.grid.per_group - w.first) * w.length + i
        n = w.lanes
        if lane is not None:
            self._oob(f"{w.var.name}[]", lane, n, m)
            return active, flat, flat * n + broadcast(lane, self.n)[active], ids
        if n == 1:
            return active, flat, flat, ids
        slots = (flat[:, None] * n + np.arange(n)).reshape(-1)
        return active, flat, slots, np.repeat(ids, n)

    def shared_ref(self, e: Expr) -> tuple[SharedArray, object, Expr | None] | None:
        """``(w, index, lane)`` when ``e`` is ``w[index]`` or ``w[index][lane]`` of a workgroup
        array in sight (``lane`` None for the whole element), else None. Of an array of arrays
        ``w[r][c]`` (``[lane]``) has the index :class:`Flat` ``(r, c)``, and a whole row
        ``w[r]`` the index :class:`Row` ``(r)``."""
        row = None
        match e:
            case Index(Name(name), index):
                lane = None
            case Index(Index(Name(name), index), lane):
                pass
            case Index(Index(Index(Name(name), row), index), lane):
                pass
            case _:
                return None
        w = self.shared.get(name)
        if w is None or w.whole or self._shadowed(name):
            return None
        if w.inner is None:
            return None if row is not None else (w, index, lane)
        if row is not None:
            return w, Flat(row, index), lane
        if lane is None:
            return w, Row(index), None
        return w, Flat(index, lane), None

    def flat_index(self, w: SharedArray, f: Flat, m: Mask) -> np.ndarray:
        """The flat element index of ``w[f.row][f.col]``, each level bounds-checked."""
        r, c = self.eval(f.row, m), self.eval(f.col, m)
        self._oob(w.var.name, r, w.var.ty.n, m)
        self._oob(f"{w.var.name}[]", c, w.inner, m)
        return r.astype(np.uint32) * np.uint32(w.inner) + c.astype(np.uint32)

    def row_start(self, w: SharedArray, r: Expr, m: Mask) -> np.ndarray:
        """The flat index of row ``r``'s first element, ``r`` bounds-checked."""
        i = self.eval(r, m)
        self._oob(w.var.name, i, w.var.ty.n, m)
        return i.astype(np.uint32) * np.uint32(w.inner)

    def shared_value(self, w: SharedArray, start: np.ndarray | None, m: Mask):
        """A whole row (from ``start``) of an array of arrays, or (``start`` None) the whole
        array, as an array value."""
        if start is None:
            if w.inner is None:
                n = w.length
                return ArrayValue(
                    self.shared_load(w, np.array([k], np.uint32), m) for k in range(n)
                )
            rows = range(w.var.ty.n)
            return ArrayValue(
                self.shared_value(w, np.array([r * w.inner], np.uint32), m) for r in rows
            )
        return ArrayValue(self.shared_load(w, start + np.uint32(k), m) for k in range(w.inner))

    def shared_put(self, w: SharedArray, start: np.ndarray | None, v, m: Mask) -> None:
        """:meth:`shared_value` in reverse: a row, or the whole array, stored element by
        element."""
        if start is None:
            if w.inner is None:
                for k, x in enumerate(v):
                    self.shared_store(w, np.array([k], np.uint32), x, m, None)
                return
            for r, row in enumerate(v):
                self.shared_put(w, np.array([r * w.inner], np.uint32), row, m)
            return
        for k, x in enumerate(v):
            self.shared_store(w, start + np.uint32(k), x, m, None)

    def _shared_race(self, w: SharedArray, slot: int, first: str, second: str) -> None:
        raise RaceError(
            f"{w.show(slot)} (workgroup memory): {first} and {second} "
            f"with no workgroupBarrier() between{self.where()}"
        )

    def shared_load(
        self, w: SharedArray, idx: np.ndarray, m: Mask, lane: np.ndarray | None = None
    ) -> np.ndarray:
        """``w[idx]`` (with ``lane``: ``w[idx][lane]``) on the lanes of ``m``: each lane reads
        its own workgroup's row."""
        active, flat, slots, ids = self._shared_at(w, idx, m, lane)
        if self.strict_init and not w.written[slots].all():
            j = self._first_bad(~w.written[slots])
            raise UninitializedRead(
                f"{w.show(int(slots[j]))} (workgroup memory) is read by "
                f"{self.grid.describe(int(ids[j]))} before anything in the dispatch wrote "
                f"it{self.where()}"
            )
        self._shared_writer_clash(w, slots, ids, "reads")
        r = w.reader[slots]
        new = np.where((r == -1) | (r == ids), ids, -2)
        w.reader[slots] = new
        back = w.reader[slots]
        w.reader[slots[back != new]] = -2  # two lanes of this load read one slot
        if lane is None:
            got = w.data[flat]
        else:
            got = w.data.reshape(-1)[slots]  # a lane's slot is its place in the flat data
        if m is None and len(active) == self.n:
            return got
        out = np.zeros((self.n,) + got.shape[1:], w.data.dtype)
        out[active] = got
        return out

    def _shared_writer_clash(
        self, w: SharedArray, slots: np.ndarray, ids: np.ndarray, verb: str
    ) -> None:
        """A race when another invocation wrote a slot these lanes touch since the barrier."""
        prev = w.owner[slots]
        clash = (prev >= 0) & (prev != ids)
        if clash.any():
            j = self._first_bad(clash)
            self._shared_race(
                w,
                int(slots[j]),
                f"{self.grid.describe(int(prev[j]))} wrote it",
                f"{self.grid.describe(int(ids[j]))} {verb} it",
            )

    def shared_store(
        self,
        w: SharedArray,
        idx: np.ndarray,
        v: np.ndarray,
        m: Mask,
        lane: np.ndarray | None = None,
    ) -> None:
        """``w[idx] = v`` (with ``lane``: ``w[idx][lane] = v``) on the lanes of ``m``, checking
        races since the last barrier."""
        active, flat, slots, ids = self._shared_at(w, idx, m, lane)
        self._shared_writer_clash(w, slots, ids, "writes")
        r = w.reader[slots]
        clash = (r != -1) & (r != ids)
        if clash.any():
            j = self._first_bad(clash)
            who = "several invocations" if r[j] == -2 else self.grid.describe(int(r[j]))
            self._shared_race(
                w, int(slots[j]), f"{who} read it", f"{self.grid.describe(int(ids[j]))} writes it"
            )
        w.owner[slots] = ids
        # Two lanes of this store on one slot: numpy kept one of them as the owner.
        self._shared_writer_clash(w, slots, ids, "writes")
        if lane is None:
            w.data[flat] = broadcast(v, self.n)[active]
        else:
            w.data.reshape(-1)[slots] = broadcast(v, self.n)[active]
        w.written[slots] = True

    def barrier(self, m: Mask, space: str = "workgroup") -> None:
        """``workgroupBarrier()`` (``space`` ``"workgroup"``), ``storageBarrier()``
        (``"storage"``) or ``textureBarrier()`` (``"texture"``): every invocation of a workgroup
        must be here, or none. The first starts a new race interval in workgroup memory; the
        others mark each storage element (storage texture texel) accessed so far as fenced, so
        that invocations of its accessor's workgroup may read or overwrite it (invocations of
        other workgroups still race with them)."""
        p = self.grid.per_group
        if m is not None or self.grid.ids is not None or self.grid.n % p:
            ids = self.grid.original(self.grid.active(m))
            groups, counts = np.unique(ids // p, return_counts=True)
            bad = np.flatnonzero(counts != p)
            if bad.size:
                g = int(groups[bad[0]])
                raise InterpError(
                    f"{space}Barrier() reached by {int(counts[bad[0]])} of {p} invocations of "
                    f"workgroup {self._wid(g)}: a barrier that some invocations of a workgroup "
                    f"do not reach is undefined in WGSL{self.where()}"
                )
        if space in ("storage", "texture"):
            if m is None and self.grid.ids is None and not self.grid.n % p:
                groups = np.arange(self.grid.offset // p, (self.grid.offset + self.grid.n) // p)
            else:
                groups = np.unique(self.grid.original(self.grid.active(m)) // p)
            if space == "storage":
                self.fence_storage(groups)
            else:
                self.fence_textures(groups)
            return
        for w in self.shared.values():
            w.barrier()

    def _wid(self, g: int) -> tuple[int, int, int]:
        wx, wy, _ = self.grid.workgroups
        return (g % wx, g // wx % wy, g // (wx * wy))

    # ---- atomics -------------------------------------------------------------------------
    def atomic(self, e: AtomicCall, m: Mask):
        """``atomicFn(&target, args...)`` on the lanes of ``m``: the lanes' operations applied
        one at a time in invocation order (lane order), each lane's value the element's before
        its own operation (see *Atomics* in :mod:`kvdsl.interp`). Two atomics on one element
        never race; WGSL's types keep plain accesses off atomic elements."""
        target = e.target
        if type(target) is Deref:  # through a pointer: the element it was taken of
            target, _ = self.locate(target, m)
        words = None  # a struct's atomic member: the word it is held in
        if type(target) is Name:  # one atomic: element 0 of an array of one
            name, idx = target.name, np.zeros(1, np.uint32)
        elif type(target) is Index and type(target.base) is Name and not self.struct_root(target):
            name, idx = target.base.name, self.eval(target.index, m)
        elif (root := self.struct_root(target)) is not None:
            idx, ty, _ = self.struct_words(root, target, m)
            name = root.var.name if type(root) is SharedArray else root.binding.name
            words = ty.dtype
        else:
            raise InterpError(f"not an atomic element: {target!r}{self.where()}")
        vals = [self.eval(a, m) for a in e.args]
        active = self.grid.active(m)
        if len(active) == 0:
            return np.zeros(1, np.uint32)
        if name in self.buffers and not self._shadowed(name):
            b = self.buffers[name]
            self._count(b, m, 0 if e.fn == "Load" else 1)
            self._oob(name, idx, b.length, m)
            unit = b.data.dtype.itemsize if words is not None else 4
            data = b.data if words is None else b.data.view(words)
            pos = broadcast(idx, self.n)[active].astype(np.int64)
            self.sync.atomic(name, pos, self.grid.original(active), e.fn != "Load")
        else:
            w = self.shared[name]
            active, pos, _, _ = self._shared_at(w, idx, m, None)
            unit = w.data.dtype.itemsize if words is not None else 4
            data = w.data if words is None else w.data.view(words)
            if e.fn != "Load":
                w.written[pos] = True
                if unit == 2:  # f16-holding memory: the atomic's other half
                    w.written[pos + 1] = True
        got = [broadcast(v, self.n)[active] for v in vals]
        if unit == 2:  # a struct holding f16 held as halves: an atomic is the word of two
            pos = pos // 2
        old, exchanged = atomic_sequence(e.fn, data, pos, got)
        if old is None:  # atomicStore
            return np.zeros(1, np.uint32)
        full = old if len(active) == self.n else np.zeros(self.n, old.dtype)
        if full is not old:
            full[active] = old
        if exchanged is None:
            return full
        flags = exchanged if len(active) == self.n else np.zeros(self.n, bool)
        if flags is not exchanged:
            flags[active] = exchanged
        return {"old_value": full, "exchanged": flags}  # the result struct, by field
