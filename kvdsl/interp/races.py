"""Storage races: who wrote and who read each element of a read_write binding, and what orders
two invocations' accesses (``storageBarrier()`` within a workgroup; across workgroups, a
barrier and an atomic on each side).

See :mod:`kvdsl.interp` (Storage buffers) for the rules; :class:`Sync` keeps the events that
order accesses, :class:`StorageRaces` (a mixin of :class:`kvdsl.interp.machine.Machine`) checks
each access against the records.
"""

from __future__ import annotations

import numpy as np

from kvdsl.interp.errors import RaceError, UninitializedRead
from kvdsl.interp.buffers import Storage, unit_name, word_path
from kvdsl.interp.values import Mask, broadcast
from kvdsl.ir.types import Array, Mat, Struct, Vec


class Sync:
    """The dispatch's ordering events, on one clock that ticks at each ``storageBarrier()`` and
    each atomic statement on a binding: the clock of each workgroup's latest
    ``storageBarrier()``, and every atomic operation on a binding (its clock, element,
    invocation, and whether it modifies the element). Within one statement atomics apply in
    invocation order, so ``clock * invocations + invocation`` is each operation's place in its
    element's modification order."""

    def __init__(self, groups: int, per_group: int, total: int) -> None:
        self.clock = 0
        self.per_group, self.total = per_group, total
        self.last_fence = np.full(groups, -1, np.int64)
        self._atomics: list[tuple[int, np.ndarray, np.ndarray, bool]] = []
        self._table: tuple[np.ndarray, ...] | None = None
        self._elements: dict[str, int] = {}  # binding name → its number in an element key
        self._known: dict[tuple[int, int, int, int, int], bool] = {}
        self.stmts: list = []  # the statements that accessed storage, numbered for the records
        self._stmt_ids: dict[int, int] = {}

    def stmt(self, s) -> int:
        """The number of statement ``s`` in :attr:`stmts`."""
        k = self._stmt_ids.get(id(s))
        if k is None:
            k = self._stmt_ids[id(s)] = len(self.stmts)
            self.stmts.append(s)
        return k

    def fence(self, groups: np.ndarray) -> int:
        """``storageBarrier()`` passed by the workgroups ``groups``; its clock."""
        self.clock += 1
        self.last_fence[groups] = self.clock
        return self.clock

    def atomic(self, name: str, elements: np.ndarray, invocations: np.ndarray, modifies: bool):
        """One atomic statement on binding ``name``: ``invocations`` (in order) on
        ``elements``."""
        self.clock += 1
        key = self._elements.setdefault(name, len(self._elements))
        elem = (np.int64(key) << np.int64(32)) + elements.astype(np.int64)
        self._atomics.append((self.clock, elem, invocations.astype(np.int64), modifies))
        self._table = None

    def ordered(self, g: np.ndarray, f: np.ndarray, h: np.ndarray) -> np.ndarray:
        """Per access: whether an earlier access by workgroup ``g``, after which ``g`` passed a
        ``storageBarrier()`` at clock ``f`` (-1: none yet), happens before an access workgroup
        ``h`` makes now. Within a workgroup the barrier orders them; across workgroups an
        atomic on some element by ``g`` after that barrier must precede, in the element's
        modification order, an atomic on it by ``h`` followed by a ``storageBarrier()`` of
        ``h``."""
        out = (f >= 0) & (g == h)
        cross = np.flatnonzero((f >= 0) & (g != h))
        if cross.size and self._atomics:
            keys = np.stack([g[cross], f[cross], h[cross]], 1).astype(np.int64)
            uniq, back = np.unique(keys, axis=0, return_inverse=True)
            ok = np.array([self._released(int(a), int(b), int(c)) for a, b, c in uniq])
            out[cross] = ok[back.reshape(-1)]
        return out

    def _released(self, g: int, f: int, h: int) -> bool:
        key = (g, f, h, int(self.last_fence[h]), len(self._atomics))
        known = self._known.get(key)
        if known is not None:
            return known
        if self._table is None:
            clock = np.concatenate([np.full(len(e), c, np.int64) for c, e, _, _ in self._atomics])
            self._table = (
                clock,
                np.concatenate([e for _, e, _, _ in self._atomics]),
                np.concatenate([i for _, _, i, _ in self._atomics]),
                np.concatenate([np.full(len(e), m) for _, e, _, m in self._atomics]),
            )
        clock, elem, inv, modifies = self._table
        group = inv // self.per_group
        pos = clock * self.total + inv
        release = (group == g) & modifies & (clock > f)
        acquire = (group == h) & (clock < self.last_fence[h])
        self._known[key] = found = _earlier(
            elem[release], pos[release], elem[acquire], pos[acquire]
        )
        return found


def _earlier(src_elem, src_pos, dst_elem, dst_pos) -> bool:
    """Whether some element's first ``src`` operation comes before its last ``dst`` one."""
    if not len(src_elem) or not len(dst_elem):
        return False
    first: dict[int, int] = {}
    for e, p in zip(src_elem.tolist(), src_pos.tolist()):
        if p < first.get(e, p + 1):
            first[e] = p
    return any(p > first.get(e, p) for e, p in zip(dst_elem.tolist(), dst_pos.tolist()))


class StorageRaces:
    """The race checks of storage bindings, a mixin of the machine (which holds ``grid``,
    ``n``, ``buffers``, ``strict_init``, ``sync`` and ``where()``).

    A read_write binding keeps, per element, its writer and the clock of the first
    ``storageBarrier()`` its writer's workgroup passed after the write (``Storage.owner``,
    ``Storage.wfence``), and its two latest readers that are different invocations, each with
    such a clock (``Storage.reads``): enough to know whether any invocation other than a given
    one read it and was not ordered before it."""

    def read_access(self, b: Storage, idx: np.ndarray, m: Mask) -> None:
        """Check a read of read_write binding ``b`` at ``idx`` by the lanes of ``m`` against the
        writes before it, and record it."""
        lanes = self.grid.active(m)
        i = broadcast(idx, self.n)[lanes].astype(np.intp)
        ids = self.grid.original(lanes).astype(np.int64)
        if b.written or self.strict_init:
            self._check_read(b, i, ids)
        _record_read(b, i, ids, self.sync.stmt(self.current))

    def _check_read(self, b: Storage, i: np.ndarray, ids: np.ndarray) -> None:
        prev = b.owners()[i]
        if self.strict_init and (prev < 0).any():
            j = self._first_bad(prev < 0)
            raise UninitializedRead(
                f"{b.binding.name}[{int(i[j])}] is read by {self.grid.describe(int(ids[j]))} "
                f"before anything in the dispatch wrote it{self.where()}"
            )
        clash = (prev >= 0) & (prev != ids)
        if clash.any():
            clash &= ~self._ordered(prev, b.wfence_at(i), ids)
        if clash.any():
            j = self._first_bad(clash)
            stmt = int(b.wstmt[i[j]])
            self._race_pair(b.binding.name, int(i[j]), int(prev[j]), int(ids[j]), "read", stmt)

    def _ordered(self, before: np.ndarray, fence: np.ndarray, ids: np.ndarray) -> np.ndarray:
        p = self.sync.per_group
        return self.sync.ordered(before // p, fence, ids // p)

    def _check_owner(self, b: Storage, prev: np.ndarray, i: np.ndarray, lanes: np.ndarray) -> None:
        """A race where an earlier write by another invocation is not ordered before these."""
        clash = (prev >= 0) & (prev != lanes)
        if clash.any():
            i = broadcast(i, len(clash)).astype(np.intp)
            clash &= ~self._ordered(prev, b.wfence_at(i), lanes)
        if clash.any():
            j = self._first_bad(clash)
            at = int(i[j])
            stmt = int(b.wstmt[at])
            self._race_pair(b.binding.name, at, int(prev[j]), int(lanes[j]), "write", stmt)

    def check_after_read(self, b: Storage, i: np.ndarray, ids: np.ndarray) -> None:
        """A race where another invocation read an element these lanes write, and its read is
        not ordered before the write."""
        if b.reads is None:
            return
        i = broadcast(i, len(ids)).astype(np.intp)
        r = b.reads[:, i]
        first = (r[0] >= 0) & (r[0] != ids)
        reader = np.where(first, r[0], r[3])
        fence = np.where(first, r[1], r[4])
        clash = (reader >= 0) & (reader != ids)
        if clash.any():
            clash &= ~self._ordered(reader, fence, ids)
        if clash.any():
            j = self._first_bad(clash)
            stmt = int(r[2, j] if first[j] else r[5, j])
            self._race_pair(
                b.binding.name, int(i[j]), int(reader[j]), int(ids[j]), "write", stmt, "read"
            )

    def fence_storage(self, groups: np.ndarray) -> None:
        """``storageBarrier()`` passed by the workgroups ``groups``: each access of theirs
        that no barrier followed yet is followed by this one."""
        clock = self.sync.fence(groups)
        passing = np.zeros(len(self.sync.last_fence), bool)
        passing[groups] = True
        p = self.sync.per_group
        held = [b.split if b.split is not None else b for b in self.buffers.values()]
        for b in held:
            if b.owner is not None or b.pending:
                owner = b.owners()
                if b.wfence is None:
                    b.wfence = np.full(b.length, -1, np.int32)
                hit = (owner >= 0) & (b.wfence < 0) & passing[np.maximum(owner, 0) // p]
                b.wfence[hit] = clock
            if b.reads is not None:
                for who, fence in ((b.reads[0], b.reads[1]), (b.reads[3], b.reads[4])):
                    fence[(who >= 0) & (fence < 0) & passing[np.maximum(who, 0) // p]] = clock

    def _race_pair(
        self,
        name: str,
        index: int,
        first: int,
        second: int,
        what: str,
        stmt: int = -1,
        did: str = "wrote",
    ) -> None:
        """Raise the race of invocation ``first``'s access (``did``, in statement ``stmt`` of
        :attr:`Sync.stmts`; -1: the one running now) and ``second``'s (``what``) to element
        ``index`` of binding ``name``."""
        b = self.buffers.get(name)
        if b is not None and isinstance(b.binding.elem, (Array, Mat)):  # nested arrays, as words
            unit = b.data.dtype.itemsize
            if b.binding.whole:  # array<array<u32, 8>, 16>: the binding is the array
                name, index = name + word_path(b.binding.elem, index, unit), None
            else:
                per = b.binding.host_values
                name, index = (
                    f"{name}[{index // per}]" + word_path(b.binding.elem, index % per, unit),
                    None,
                )
        elif b is not None and b.split is not None:  # held per component from now on
            n = b.binding.elem.n
            name, index = f"{name}[{index // n}].{'xyzw'[index % n]}", None
        elif b is not None and b.binding.whole and isinstance(b.binding.elem, Vec):
            name, index = f"{name}.{'xyzw'[index]}", None  # one vector, held as its scalars
        elif b is not None and b.binding.whole and not isinstance(b.binding.elem, Struct):
            index = None  # one scalar or atomic
        elif b is not None and b.binding.whole:  # one struct, held as words (halves)
            unit = unit_name(b.data.dtype.itemsize)
            name, index = f"{name} ({unit} {index} of the struct)", None
        elif b is not None and isinstance(b.binding.elem, Struct):  # held as words (halves)
            per, unit = b.binding.host_values, unit_name(b.data.dtype.itemsize)
            name, index = f"{name}[{index // per}] ({unit} {index % per} of the struct)", None
        before = self.sync.stmts[stmt] if stmt >= 0 else self.current
        at = self.where(before) if before is not self.current else ""
        raise RaceError(
            f"{name if index is None else f'{name}[{index}]'}: {self.grid.describe(first)} "
            f"{did} it{at} and {self.grid.describe(second)} {what}s it in the same dispatch"
            f"{self.where()}"
        )


def _record_read(b: Storage, i: np.ndarray, ids: np.ndarray, stmt: int) -> None:
    """Enter reads of elements ``i`` by invocations ``ids`` in statement ``stmt`` in
    ``b.reads``: per element the latest reader and, of the invocations other than it, the
    latest one, each with the clock of a barrier after its read (-1: none yet) and its
    statement."""
    if b.reads is None:
        b.reads = np.full((6, b.length), -1, np.int32)
    r = b.reads
    if len(i) > 1 and not bool((i[1:] > i[:-1]).all()):
        order = np.argsort(i, kind="stable")
        i, ids = i[order], ids[order]
        start = np.ones(len(i), bool)
        start[1:] = i[1:] != i[:-1]
        starts = np.flatnonzero(start)
        ends = np.append(starts[1:], len(i)) - 1
        first, last, i = ids[starts], ids[ends], i[starts]
    else:
        first = last = ids
    old = r[:3, i]
    several = first != last  # two invocations of this statement read it
    shift = ~several & (old[0] >= 0) & (old[0] != last)
    r[3, i] = np.where(several, first, np.where(shift, old[0], r[3, i]))
    r[4, i] = np.where(several, -1, np.where(shift, old[1], r[4, i]))
    r[5, i] = np.where(several, stmt, np.where(shift, old[2], r[5, i]))
    r[0, i], r[1, i], r[2, i] = last, -1, stmt
