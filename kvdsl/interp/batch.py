"""Batched loops: several trips of a counted loop run as one pass over (trip × invocation) lanes.

A loop like the walks' ``for (var s = 0u; s < HEAD_DIM; s = s + 1u) { dst[f(s)] = src[g(s)]; }``
costs a few dozen numpy calls per trip whatever the trips do; over 128 trips that is most of a
kernel's time. When no trip can see what another trip did, the trips may as well run at once:
the machine then runs the body for ``T`` trips together on a grid whose lane ``t*N + k`` is
trip ``t`` of lane ``k`` (:class:`BatchGrid`), with the loop variable a per-lane value and every
value from outside the loop repeated for each trip.

:func:`plan` decides from the IR alone whether a loop qualifies; the machine adds the checks
only the values can make (the trip count is uniform and known on entry, no outside array value
is read, each store of a batch writes distinct elements) and raises :class:`Fallback` when a
batch breaks one midway, so that :func:`kvdsl.interp.run` repeats the dispatch trip by trip.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kvdsl.ir import tree as ir
from kvdsl.ir.ops import SUBGROUP_OPS
from kvdsl.interp.scope import Slot
from kvdsl.interp.values import ArrayValue, Grid, empty, is_uniform, normal

# Lanes per batch: as many trips as keep (trips × invocations) near this many lanes.
LANES = 1 << 18
MAX_SIMULATED = 1 << 16  # a trip count past this is left to the trip-by-trip loop


class Fallback(Exception):
    """A batch met something only trip-by-trip execution gets right (two trips storing one
    element); the dispatch is to be run again without batching."""


@dataclass(frozen=True)
class Plan:
    """What the machine needs to batch a ``for`` loop :func:`plan` accepted."""

    var: str  # the loop variable
    free: tuple[str, ...]  # names the body reads from outside the loop (never array values)


def _header_pure(e) -> bool:
    return not any(isinstance(x, (ir.Index, ir.FnCall)) for x in ir.walk(e))


def _declared(body) -> set[str]:
    return {x.name for x in ir.walk(body) if isinstance(x, (ir.Let, ir.Var))}


def _root(target):
    while not isinstance(target, ir.Name):
        target = target.base
    return target.name


def _helpers(body, functions: dict[str, ir.Function]) -> list[ir.Function]:
    """Every helper ``body`` calls, directly or through other helpers."""
    seen: dict[str, ir.Function] = {}
    stack = [x.name for x in ir.walk(body) if isinstance(x, ir.FnCall)]
    while stack:
        name = stack.pop()
        if name in seen or name not in functions:
            continue
        seen[name] = functions[name]
        stack += [x.name for x in ir.walk(functions[name].body) if isinstance(x, ir.FnCall)]
    return list(seen.values())


def plan(s: ir.For, kernel: ir.Kernel, functions: dict[str, ir.Function]) -> Plan | None:
    """A :class:`Plan` if ``s`` can run batched as far as its IR shows, else None.

    The loop must be ``for (var i = a; cond; i = u)`` with ``a``, ``cond`` and ``u`` free of
    indexing and calls (so they are uniform when their names are, which the machine checks), and
    its body must have no loop, ``break``, ``continue``, ``return``, barrier or subgroup call, assign nothing
    declared outside the body except plain stores to storage bindings (at most one store
    statement per binding), never store to workgroup memory, and never read a binding it
    stores to. Helpers it calls may not store to bindings or workgroup memory, hold a barrier,
    or read a binding the body stores to.
    """
    init, cond, update = s.init, s.cond, s.update
    if not isinstance(init, ir.Var) or cond is None or update is None:
        return None
    var = init.name
    if not (isinstance(update.target, ir.Name) and update.target.name == var):
        return None
    if not all(_header_pure(e) for e in (init.init, cond, update.value) if e is not None):
        return None
    bindings = {b.name for b in kernel.bindings}
    shared = {w.name for w in kernel.workgroup_vars}
    private = {v.name for v in kernel.private_vars}
    declared = _declared(s.body)
    if declared & (bindings | shared | {var, "params"}) or declared & {
        p for p, _ in kernel.builtins
    }:
        return None
    for x in ir.walk(s.body):
        if isinstance(
            x, (ir.For, ir.Loop, ir.Break, ir.Continue, ir.Return, ir.Barrier, ir.UniformLoad)
        ):
            return None
        if isinstance(x, (ir.AddressOf, ir.Deref)):  # memory reached through a pointer
            return None
        if isinstance(x, ir.Call) and x.op in SUBGROUP_OPS:  # reads other invocations' lanes
            return None
        if isinstance(x, (ir.AtomicCall, ir.TextureStore)):  # trip by trip
            return None
    # Which declaration each name means, scope by scope: a name declared in a nested block of
    # the body means the outer one before and after that block (taking the body's declarations
    # as one set would batch an assignment to an outer var shadowed in a block as a local one,
    # and lose its value silently).
    outer_reads, outer_assigns = _outer(s.body)
    stored: list[str] = []
    for x in outer_assigns:
        root = _root(x.target)
        plain = isinstance(x.target, ir.Index) and isinstance(x.target.base, ir.Name)
        if root not in bindings or x.op is not None or not plain:
            return None
        stored.append(root)
    if len(set(stored)) != len(stored):
        return None
    helpers = _helpers(s.body, functions)
    for f in helpers:
        for x in ir.walk(f.body):
            if isinstance(x, (ir.Barrier, ir.UniformLoad)):
                return None
            if isinstance(x, ir.Call) and x.op in SUBGROUP_OPS:
                return None
            if isinstance(x, (ir.AddressOf, ir.Deref, ir.AtomicCall, ir.TextureStore)):
                return None
            if isinstance(x, ir.Assign) and _root(x.target) in bindings | shared | private:
                return None
            if isinstance(x, ir.Index) and isinstance(x.base, ir.Name) and x.base.name in stored:
                return None
    if _reads(s.body, set(stored)):
        return None
    builtins = {p for p, _ in kernel.builtins}
    free = outer_reads - bindings - shared - builtins - {var, "params"}
    return Plan(var, tuple(sorted(free)))


def _outer(body) -> tuple[set[str], list[ir.Assign]]:
    """The names ``body`` reads that it does not declare where they are read, and its
    assignments to names it does not declare where they are assigned (scope by scope)."""
    reads: set[str] = set()
    assigns: list[ir.Assign] = []
    scopes: list[set[str]] = []

    def local(name: str) -> bool:
        return any(name in sc for sc in scopes)

    def expr(e) -> None:
        for x in ir.walk(e):
            if isinstance(x, ir.Name) and not local(x.name):
                reads.add(x.name)

    def block(stmts) -> None:
        scopes.append(set())
        for st in stmts:
            if isinstance(st, ir.Let):
                expr(st.value)
                scopes[-1].add(st.name)
            elif isinstance(st, ir.Var):
                if st.init is not None:
                    expr(st.init)
                scopes[-1].add(st.name)
            elif isinstance(st, ir.Assign):
                expr(st.target)
                expr(st.value)
                if not local(_root(st.target)):
                    assigns.append(st)
            elif isinstance(st, ir.If):
                expr(st.cond)
                block(st.then)
                block(st.orelse)
            elif isinstance(st, ir.Block):
                block(st.body)
            else:
                expr(st)
        scopes.pop()

    block(body)
    return reads, assigns


def _reads(node, names: set[str]) -> bool:
    """Whether ``node`` reads an element of a binding in ``names`` (the target of a plain store
    is written, not read; its index is read)."""
    if isinstance(node, ir.Assign) and node.op is None and isinstance(node.target, ir.Index):
        return _reads(node.target.index, names) or _reads(node.value, names)
    if isinstance(node, ir.Index) and isinstance(node.base, ir.Name) and node.base.name in names:
        return True
    if isinstance(node, tuple):
        return any(_reads(x, names) for x in node)
    if hasattr(node, "__dataclass_fields__"):
        return any(_reads(getattr(node, f), names) for f in node.__dataclass_fields__)
    return False


class BatchGrid:
    """``trips`` trips of a loop over lanes ``lo .. hi-1`` of ``base`` (``K = hi - lo`` of
    them), in blocks of ``inner`` lanes: lane ``(o*trips + t)*inner + j`` is trip ``t`` of base
    lane ``lo + o*inner + j``. ``inner == K`` is trip-major, ``inner == 1`` lane-major; which
    order only decides which index sets come out as long runs (a cooperative walk's are long
    with ``inner`` the workgroup size, a per-row walk's lane-major). Builtins, invocation ids and
    descriptions are the base lane's."""

    def __init__(self, base: Grid, trips: int, lo: int, hi: int, inner: int) -> None:
        self.base = base
        self.trips = trips
        self.lo, self.hi, self.inner = lo, hi, inner
        self.k = hi - lo
        self.n = self.k * trips
        self.workgroups, self.size = base.workgroups, base.size
        self.per_group, self.total = base.per_group, base.total
        self.ids, self.offset = base.ids, base.offset
        self._lanes: np.ndarray | None = None
        self._original: np.ndarray | None = None
        self._cols: dict[tuple[str, int], np.ndarray] = {}

    @property
    def lanes(self) -> np.ndarray:
        if self._lanes is None:
            self._lanes = np.arange(self.n, dtype=np.int64)
        return self._lanes

    def spread(self, v: np.ndarray) -> np.ndarray:
        """A per-lane value of ``base`` on this batch's lanes (a uniform one as it is)."""
        if v.shape[0] != self.base.n or v.shape[0] == 1:
            return v
        v = v[self.lo : self.hi]
        if self.trips == 1:
            return v
        rest = v.shape[1:]
        blocks = v.reshape((self.k // self.inner, 1, self.inner) + rest)
        full = (self.k // self.inner, self.trips, self.inner) + rest
        return np.broadcast_to(blocks, full).reshape((self.n,) + rest)

    def counter(self, values: np.ndarray) -> np.ndarray:
        """The loop variable: ``values[t]`` on trip ``t`` of every lane."""
        rest = values.shape[1:]
        v = values.reshape((1, self.trips, 1) + rest)
        full = (self.k // self.inner, self.trips, self.inner) + rest
        return np.broadcast_to(v, full).reshape((self.n,) + rest)

    def mask(self, m):
        """The base mask ``m`` on every trip."""
        return None if m is None else self.spread(m)

    def column(self, builtin: str, comp: int) -> np.ndarray:
        key = (builtin, comp)
        col = self._cols.get(key)
        if col is None:
            col = self._cols[key] = self.spread(self.base.column(builtin, comp))
        return col

    def original(self, lanes):
        if self._original is None:
            ids = self.base.original(self.base.lanes)
            self._original = self.spread(ids) if self.base.n > 1 else np.repeat(ids, self.n)
        return self._original if lanes is self._lanes else self._original[lanes]

    def describe(self, i: int) -> str:
        return self.base.describe(i)

    def writers(self, m) -> tuple | None:
        """The invocation ids of the lanes of ``m`` as ``(first, counts, steps)`` (see
        :meth:`kvdsl.interp.buffers.Storage.defer`), where they are a pattern."""
        if m is not None or self.base.ids is not None:
            return None
        blocks = (self.k // self.inner, self.trips, self.inner)
        return (self.base.offset + self.lo, blocks, (self.inner, 0, 1))

    def active(self, m) -> np.ndarray:
        return self.lanes if m is None else np.flatnonzero(m)

    def compact(self, keep) -> None:
        raise AssertionError("a batched loop body never drops lanes")

    def best_inner(self, idx: np.ndarray) -> int | None:
        """From a store's index over this (trip-major) batch's lanes, the block size under which
        consecutive trips of a lane continue the run its neighbours make: 1 when a trip steps
        the index by 1, the workgroup size when a trip steps it by a workgroup's span, else None
        (keep trip-major)."""
        if self.trips < 2 or self.k < 2 or idx.shape[0] != self.n or idx.ndim != 1:
            return None
        lane_step = int(idx[1]) - int(idx[0])
        trip_step = int(idx[self.k]) - int(idx[0])
        if trip_step == 1:
            return 1
        p = self.per_group
        if lane_step > 0 and trip_step == lane_step * p and self.k % p == 0:
            return p
        return None


def run_batched(mc, s: ir.For, p: Plan, m) -> bool:
    """Run ``s`` as batches of (trip × lane) lanes (see :mod:`kvdsl.interp.batch`); False,
    having run nothing, when the values rule it out (fewer than two lanes or trips, a trip
    count that is not uniform or not known on entry, an array value from outside read).

    Each batch runs the body once for its trips of its lanes: every lane's trips in order,
    different lanes' in any order, which only a race could tell (and a race is an error).
    """
    n0 = mc.n
    if n0 < 2 or n0 * 2 > LANES:
        return False
    for name in p.free:
        slot = next((sc[name] for sc in reversed(mc.scopes) if name in sc), None)
        if slot is not None and isinstance(slot.value, ArrayValue):
            return False
    trips = trip_values(mc, s, m)
    if trips is None or len(trips) < 2:
        return False
    vals = np.concatenate(trips)
    count = len(vals)
    per_trips = min(count, LANES)
    width = max(1, LANES // per_trips)
    g = mc.grid.per_group
    if width >= g:
        width -= width % g  # whole workgroups keep a walk's index sets affine
    grid0 = mc.grid
    mc.batched = True
    mc.count_trips(s, count + 1)  # the last trip's false condition counts, as on a GPU
    for lo in range(0, n0, width):
        hi = min(n0, lo + width)
        for start in range(0, count, per_trips):
            chunk = vals[start : start + per_trips]
            inner = mc._orders.get(id(s))
            inner = hi - lo if inner is None or (hi - lo) % inner else inner
            bg = BatchGrid(grid0, len(chunk), lo, hi, inner)
            bm = normal(bg.mask(m))
            if empty(bm):
                continue
            mc.scopes.append({p.var: Slot(bg.counter(chunk), bm, var=True)})
            mc.grid, mc.n, mc.batch, mc._repeated = bg, bg.n, bg, {}
            probing = mc._probe = id(s) not in mc._orders
            try:
                mc.scoped(s.body, bm)
            finally:
                mc.scopes.pop()
                mc.grid, mc.n, mc.batch, mc._repeated = grid0, n0, None, {}
            if probing and mc._probe is not True:
                # The first batch's first store chose the lane order of the rest (speed only).
                mc._orders[id(s)] = mc._probe or None
    return True


def trip_values(mc, s: ir.For, m) -> list[np.ndarray] | None:
    """The loop variable's value on each trip, when the header keeps it uniform; None if it
    does not, or if the loop runs past :data:`MAX_SIMULATED` trips. The header is
    free of indexing and calls, so evaluating it here changes nothing."""
    mc.scopes.append({})
    try:
        mc.stmt(s.init, m)
        slot = mc.scopes[-1][s.init.name]
        out: list[np.ndarray] = []
        while len(out) <= MAX_SIMULATED:
            if isinstance(slot.value, ArrayValue) or not is_uniform(slot.value):
                return None
            c = mc.eval(s.cond, m)
            if not is_uniform(c) or c.ndim != 1:
                return None
            if not c[0]:
                return out
            out.append(slot.value)
            mc.stmt(s.update, m)
        return None
    finally:
        mc.scopes.pop()
