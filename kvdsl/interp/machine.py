"""The interpreter proper: statements and expressions over every invocation at once.

See :mod:`kvdsl.interp` for the semantics this module implements.
"""

from __future__ import annotations

import numpy as np

from kvdsl.ir import ops
from kvdsl.ir.nodes import (
    BUILTIN_INPUTS,
    Assign,
    Barrier,
    Binary,
    Block,
    Break,
    Call,
    Comment,
    Construct,
    Continue,
    Convert,
    Expr,
    FnCall,
    For,
    Function,
    If,
    Index,
    Kernel,
    Let,
    Lit,
    Loop,
    Member,
    Name,
    Return,
    Stmt,
    Unary,
    Var,
)
from kvdsl.ir.nodes import walk
from kvdsl.ir.ops import Op
from kvdsl.ir.types import Array, Vec
from kvdsl.emit import emit_expr
from kvdsl.ir.verify import show
from kvdsl.interp import batch
from kvdsl.interp.batch import BatchGrid, Fallback
from kvdsl.interp.errors import InterpError, OutOfBounds, RaceError, UninitializedRead
from kvdsl.interp.values import (
    COMPONENTS,
    ArrayValue,
    Grid,
    Mask,
    SharedArray,
    Storage,
    affine,
    broadcast,
    convert,
    counts,
    empty,
    is_uniform,
    m_and,
    m_andnot,
    m_or,
    normal,
    sel,
    strided,
)

_INT_FAST = {
    Op.ADD: np.add,
    Op.SUB: np.subtract,
    Op.MUL: np.multiply,
    Op.LT: np.less,
    Op.LE: np.less_equal,
    Op.GT: np.greater,
    Op.GE: np.greater_equal,
    Op.EQ: np.equal,
    Op.NE: np.not_equal,
    Op.AND: np.bitwise_and,
    Op.OR: np.bitwise_or,
    Op.XOR: np.bitwise_xor,
    Op.MIN: np.minimum,
    Op.MAX: np.maximum,
}
# Integer operators that may write their result over an operand (elementwise, same dtype out).
_IN_PLACE = {
    op: _INT_FAST[op] for op in (Op.ADD, Op.SUB, Op.MUL, Op.AND, Op.OR, Op.XOR, Op.MIN, Op.MAX)
}
# Binary operators whose result may be an operand itself (short-circuit logic returns its left
# side when the right side need not run); every other one makes a new array.
_NOT_FRESH = (Op.LAND, Op.LOR)
MAX_TRIPS = 1 << 22  # a loop still running after this many trips is taken to be infinite
# Invocations per chunk: big enough that numpy's per-call overhead is small against the work,
# small enough that a chunk's arrays are reused from the allocator instead of page-faulted in.
CHUNK = 1 << 18


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


class Slot:
    """A name's value; for a ``var``, the mask it was declared under (see ``_assign_name``)."""

    __slots__ = ("value", "decl", "var")

    def __init__(self, value, decl: Mask = None, var: bool = False) -> None:
        self.value = value
        self.decl = decl
        self.var = var


class Frame:
    """One activation of the entry point or a helper: lanes that returned and the result."""

    def __init__(self, entry: Mask) -> None:
        self.entry = entry
        self.returned = 0  # how many return statements ran, to tell if a loop saw one
        self.done: np.ndarray | None = None  # lanes that returned
        self.result = None
        self.loops: list[list[Mask | bool]] = []  # per open loop: lanes that continued


def reads_read_write(kernel: Kernel) -> bool:
    """Whether ``kernel`` may read a read_write binding: any index of one's name that is not the
    target of a plain ``=`` (a shadowing local counts too, which only errs on the safe side)."""
    rw = {b.name for b in kernel.bindings if b.access == "read_write"}

    def reads(node) -> bool:
        if isinstance(node, Assign) and node.op is None and isinstance(node.target, Index):
            return reads(node.target.index) or reads(node.value)
        if isinstance(node, Index) and isinstance(node.base, Name) and node.base.name in rw:
            return True
        if isinstance(node, tuple):
            return any(reads(x) for x in node)
        if hasattr(node, "__dataclass_fields__"):
            return any(reads(getattr(node, f)) for f in node.__dataclass_fields__)
        return False

    return reads((kernel.body, kernel.functions))


def render(s: Stmt | None) -> str:
    """A statement as one line of WGSL, for messages."""
    match s:
        case None:
            return ""
        case Let(name, value):
            return f"let {name} = {emit_expr(value)}"
        case Var(name, ty, init):
            return f"var {name}: {ty}" + ("" if init is None else f" = {emit_expr(init)}")
        case Assign(target, value, op):
            eq = "=" if op is None else ops.info(op).spelling + "="
            return f"{emit_expr(target)} {eq} {emit_expr(value)}"
        case If(cond):
            return f"if ({emit_expr(cond)})"
        case For(init, cond, update):
            return (
                f"for ({render(init)}; {'' if cond is None else emit_expr(cond)}; {render(update)})"
            )
        case Return(value):
            return "return" + ("" if value is None else f" {emit_expr(value)}")
        case _:
            return show(s)


class Machine:
    """Runs one dispatch of a kernel."""

    def __init__(
        self,
        kernel: Kernel,
        grid: Grid,
        buffers: dict[str, Storage],
        params: dict[str, np.ndarray],
        strict_init: bool,
        source_lines: dict[int, int] | None,
        batching: bool = True,
    ) -> None:
        self.kernel = kernel
        self.grid = grid
        self.n = grid.n
        self.buffers = buffers
        self.params = params
        self.strict_init = strict_init
        self.source_lines = source_lines or {}
        self.functions: dict[str, Function] = {f.name: f for f in kernel.functions}
        self.builtins = {p: BUILTIN_INPUTS[kind] for p, kind in kernel.builtins}
        self.module: dict[str, Slot] = {}
        self.scopes: list[dict[str, Slot]] = [self.module]
        self.frame = self.main = Frame(None)
        self.lits: dict[Lit, np.ndarray] = {}
        self.shared: dict[str, SharedArray] = {}  # the chunk's workgroup memory
        self.current: Stmt | None = None
        self._affine: list[tuple] = []  # the last few index arrays :meth:`affine` looked at
        self.batching = batching
        self.batched = False  # whether a loop ran batched (see :mod:`kvdsl.interp.batch`)
        self.batch: BatchGrid | None = None  # the grid of the batch running now
        self._plans: dict[int, batch.Plan | None] = {}
        self._orders: dict[int, int | None] = {}  # per batched loop: lane block (None: trips)
        self._last_load: tuple | None = None  # (index expr, mask, scopes, index) of a load
        self._want_view = False  # the next binding load may return a :class:`Strided`
        self._static: dict[int, bool] = {}  # per expression node: see :meth:`static`
        self._static_vals: dict[int, np.ndarray] = {}
        self._locals = {
            x.name for x in walk((kernel.body, kernel.functions)) if isinstance(x, (Let, Var))
        }
        self._locals |= {p for f in kernel.functions for p, _ in f.params}
        self._locals |= {p for p, _ in kernel.builtins}
        self._probe: bool | int | None = False  # True: the next store picks the lane order
        self._repeated: dict[int, tuple[Slot, Slot]] = {}  # outside slots, repeated per trip
        for c in kernel.consts:
            self.module[c.name] = Slot(self.eval(c.value, None))

    # ---- entry ---------------------------------------------------------------------------
    def run(self) -> None:
        """Execute the entry point on every invocation, one chunk of workgroups at a time.

        Workgroups are independent (workgroup memory is per chunk, one row per workgroup) and
        the race check's record of who wrote what is per binding, across chunks. Only a kernel that
        reads a read_write binding runs as one chunk: a read is checked against the writes made
        before it, so chunking could hide a read of an element a later chunk writes.
        """
        full = self.grid
        if full.n == 0:
            return
        target = CHUNK if not reads_read_write(self.kernel) else full.n
        for start, stop in full.chunks(target):
            self.grid = Grid(full.workgroups, full.size, start, stop)
            self.n = self.grid.n
            p = full.per_group
            self.shared = {
                w.name: SharedArray(w, (stop - start) // p, start // p)
                for w in self.kernel.workgroup_vars
            }
            self.scopes = [self.module, {}]
            self.frame = self.main = Frame(None)
            self.block(self.kernel.body, None)

    # ---- errors --------------------------------------------------------------------------
    def where(self) -> str:
        s = self.current
        if s is None:
            return ""
        line = self.source_lines.get(id(s))
        return f" in `{render(s)}`" + ("" if line is None else f" (line {line})")

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

    # ---- names ---------------------------------------------------------------------------
    def lookup(self, name: str) -> Slot:
        for scope in reversed(self.scopes):
            slot = scope.get(name)
            if slot is not None:
                return slot if self.batch is None else self._spread(slot)
        raise InterpError(f"undefined name '{name}'{self.where()}")

    def _spread(self, slot: Slot) -> Slot:
        """In a batch, a slot from outside the loop with its value repeated for every trip
        (the body never assigns one, so a copy serves)."""
        v, rep = slot.value, self.batch.spread
        if isinstance(v, ArrayValue):
            if all(rep(x) is x for x in v):
                return slot
        elif rep(v) is v:
            return slot
        hit = self._repeated.get(id(slot))
        if hit is None:
            value = ArrayValue(rep(x) for x in v) if isinstance(v, ArrayValue) else rep(v)
            hit = self._repeated[id(slot)] = (slot, Slot(value, None, slot.var))
        return hit[1]

    def declare(self, name: str, slot: Slot) -> None:
        self.scopes[-1][name] = slot

    # ---- statements ----------------------------------------------------------------------
    def block(self, body: tuple[Stmt, ...], m: Mask) -> Mask:
        """Run ``body`` on the lanes of ``m``; the lanes that reach its end."""
        top = body is self.kernel.body
        for s in body:
            out = self.stmt(s, m)
            if out is not m:
                if empty(out):
                    return out
                m = out
                if top and m is not None and 4 * int(np.count_nonzero(m)) <= 3 * self.n:
                    self.compact(m)
                    m = None
        return m

    def compact(self, m: np.ndarray) -> None:
        """Drop the lanes that returned from the entry point (they never run again) so that
        later statements do no work for them: an early ``if (i >= n) { return; }`` in a folded
        dispatch can leave half the lanes dead. Only at the entry point's top level, where every
        live value is in scope."""
        count = int(np.count_nonzero(m))
        first, last = int(m.argmax()), self.n - 1 - int(m[::-1].argmax())
        # The live lanes are usually one run (a folded dispatch's tail): views, not copies.
        keep = slice(first, last + 1) if last - first + 1 == count else np.flatnonzero(m)

        def take(v):
            if isinstance(v, ArrayValue):
                return ArrayValue(take(x) for x in v)
            return v if v is None or v.shape[0] == 1 else v[keep]

        for scope in self.scopes[1:]:
            for slot in scope.values():
                slot.value, slot.decl = take(slot.value), None
        self.frame.done = None
        self.grid.compact(keep)
        self.n = self.grid.n

    def scoped(self, body: tuple[Stmt, ...], m: Mask) -> Mask:
        self.scopes.append({})
        try:
            return self.block(body, m)
        finally:
            self.scopes.pop()

    def stmt(self, s: Stmt, m: Mask) -> Mask:
        """Run one statement; return the lanes that continue after it."""
        self.current = s
        match s:
            case Let(name, value):
                self.declare(name, Slot(self.eval(value, m)))
                return m
            case Var(name, ty, init):
                value = self.zero(ty) if init is None else self.eval(init, m)
                self.declare(name, Slot(value, m, var=True))
                return m
            case Assign(target, value, op):
                self._last_load = None
                # ``dst[x] = src[y]`` on every lane may copy buffer to buffer, not via an array.
                self._want_view = (
                    m is None
                    and op is None
                    and type(value) is Index
                    and type(target) is Index
                    and type(target.base) is Name
                    and target.base.name in self.buffers
                )
                v = self.eval(value, m)
                self._want_view = False
                if op is not None:
                    v = self.apply(op, (self.eval(target, m), v))
                self.assign(target, v, m)
                return m
            case If(cond, then, orelse):
                c = self.eval(cond, m)
                if is_uniform(c) and self.n != 1:
                    return self.scoped(then if c[0] else orelse, m)
                tm = m_and(m, c, self.n)
                if empty(tm) and not orelse:
                    return m  # a guard no invocation takes
                tm = normal(tm)
                em = m_andnot(m, c, self.n)
                tout = tm if empty(tm) else self.scoped(then, tm)
                eout = em if empty(em) or not orelse else self.scoped(orelse, em)
                if tout is tm and eout is em:
                    return m
                return normal(m_or(tout, eout) if not empty(tout) else eout)
            case For() | Loop():
                return self.loop(s, m)
            case Break():
                return np.zeros(self.n, bool)
            case Continue():
                cont = self.frame.loops[-1]
                cont[0] = m_or(cont[0], m) if cont[0] is not False else m
                return np.zeros(self.n, bool)
            case Return(value):
                self.ret(value, m)
                return np.zeros(self.n, bool)
            case Block(body):
                return self.scoped(body, m)
            case Comment():
                return m
            case Barrier():
                self.barrier(m)
                return m
        raise InterpError(f"not a statement: {s!r}")

    def loop(self, s: For | Loop, m: Mask) -> Mask:
        """``for``/``loop``: each trip runs the body on the lanes still looping.

        A lane leaves at a false condition, ``break`` or ``return``; ``continue`` skips to the
        update. After the loop every lane that entered goes on, except those that returned.
        """
        if isinstance(s, For) and self.batching and self.batch is None:
            key = id(s)
            if key not in self._plans:
                self._plans[key] = batch.plan(s, self.kernel, self.functions)
            p = self._plans[key]
            if p is not None and self.batched_loop(s, p, m):
                return m
        frame = self.frame
        returned = frame.returned
        self.scopes.append({})
        cont: list = [False]
        frame.loops.append(cont)
        try:
            init, cond, update, body = (
                (s.init, s.cond, s.update, s.body)
                if isinstance(s, For)
                else (None,) * 3 + (s.body,)
            )
            if init is not None:
                self.stmt(init, m)
            lm = m
            for _ in range(MAX_TRIPS):
                if cond is not None:
                    self.current = s
                    lm = m_and(lm, self.eval(cond, lm), self.n)
                    if empty(lm):
                        break
                cont[0] = False
                out = self.scoped(body, lm)
                if cont[0] is False:
                    nxt = out
                else:
                    nxt = cont[0] if empty(out) else m_or(out, cont[0])
                if nxt is not lm:
                    if empty(nxt):
                        break
                    nxt = normal(nxt)
                if update is not None:
                    self.stmt(update, nxt)
                lm = nxt
            else:
                self.current = s
                raise InterpError(f"loop ran {MAX_TRIPS} trips without ending{self.where()}")
        finally:
            frame.loops.pop()
            self.scopes.pop()
        if frame.returned == returned:
            return m
        return normal(~frame.done if m is None else m & ~frame.done)

    def batched_loop(self, s: For, p: batch.Plan, m: Mask) -> bool:
        """Run ``s`` in batches (:func:`kvdsl.interp.batch.run_batched`); False, having run
        nothing, when its values rule batching out."""
        return batch.run_batched(self, s, p, m)

    def ret(self, value: Expr | None, m: Mask) -> None:
        frame = self.frame
        frame.returned += 1
        lanes = np.ones(self.n, bool) if m is None else m
        frame.done = lanes if frame.done is None else frame.done | lanes
        if value is None:
            return
        v = self.eval(value, m)
        if frame.result is None and m is frame.entry:
            frame.result = v
        else:
            old = frame.result if frame.result is not None else np.zeros_like(v)
            frame.result = sel(lanes, v, old)

    # ---- assignment ----------------------------------------------------------------------
    def zero(self, ty) -> np.ndarray | ArrayValue:
        """WGSL's zero value of ``ty``, uniform."""
        if isinstance(ty, Array):
            return ArrayValue([self.zero(ty.elem)] * ty.n)
        shape = (1, ty.n) if isinstance(ty, Vec) else (1,)
        return np.zeros(shape, ty.scalar.dtype)

    def root(self, target: Expr) -> Name:
        while isinstance(target, (Index, Member)):
            target = target.base
        return target

    def assign(self, target: Expr, v, m: Mask) -> None:
        """Store ``v`` into ``target`` on the lanes of ``m``."""
        if isinstance(target, Index) and isinstance(target.base, Name):
            b = self.buffers.get(target.base.name)
            if b is not None and not self._shadowed(target.base.name):
                # ``dst[x] = src[x]``: the index the value's load just computed, not a copy.
                last = self._last_load
                if last is not None and last[1] is m and last[2] is self.scopes:
                    idx = last[3] if last[0] == target.index else self.eval(target.index, m)
                else:
                    idx = self.eval(target.index, m)
                self.store(b, idx, v, m)
                return
            w = self.shared.get(target.base.name)
            if w is not None and not self._shadowed(target.base.name):
                self.shared_store(w, self.eval(target.index, m), v, m)
                return
        slot = self.lookup(self.root(target).name)
        # Lanes outside the var's declaring mask never see it, so when the statement runs on
        # exactly those lanes the new value can replace the old one outright: a loop counter
        # stays uniform (one value for all lanes) instead of being masked into N copies.
        eff = None if m is slot.decl else m
        slot.value = self.update(target, v, m, eff)

    def _shadowed(self, name: str) -> bool:
        return any(name in scope for scope in self.scopes[1:])

    def update(self, target: Expr, v, m: Mask, eff: Mask):
        """The new value of the var under ``target`` once ``target`` holds ``v``."""
        match target:
            case Name(name):
                old = self.lookup(name).value
                if eff is None or isinstance(v, ArrayValue):
                    return v if eff is None else ArrayValue(sel(eff, a, b) for a, b in zip(v, old))
                return sel(eff, v, old)
            case Index(base, index):
                container = self.eval(base, m)
                idx = self.eval(index, m)
                return self.update(base, self.set_elem(container, idx, v, m, eff, base), m, None)
            case Member(base, name):
                container = self.eval(base, m)
                if len(name) != 1:
                    raise InterpError(f"cannot assign to swizzle .{name}{self.where()}")
                idx = np.array([COMPONENTS.index(name)], np.uint32)
                return self.update(base, self.set_elem(container, idx, v, m, eff, base), m, None)
        raise InterpError(f"cannot assign to {show(target)}{self.where()}")

    def set_elem(self, container, idx: np.ndarray, v, m: Mask, eff: Mask, base: Expr):
        """``container`` with element ``idx`` set to ``v`` on the lanes of ``eff``."""
        length = len(container) if isinstance(container, ArrayValue) else container.shape[1]
        self._oob(show(base), idx, length, m)
        if isinstance(container, ArrayValue):
            out = ArrayValue(container)
            if is_uniform(idx):
                i = int(idx[0])
                out[i] = sel(eff, v, out[i])
            else:
                live = eff if eff is not None else np.ones(self.n, bool)
                for i in range(length):
                    out[i] = sel(live & (idx == i), v, out[i])
            return out
        lanes = max(container.shape[0], v.shape[0], 1 if eff is None else self.n)
        out = np.array(broadcast(container, lanes))
        if is_uniform(idx):
            i = int(idx[0])
            out[:, i] = sel(eff, v, out[:, i]) if eff is not None else v
        else:
            live = eff if eff is not None else np.ones(self.n, bool)
            rows = np.flatnonzero(live)
            out = np.array(broadcast(out, self.n))
            out[rows, idx[rows]] = broadcast(v, self.n)[rows]
        return out

    def store(self, b: Storage, idx: np.ndarray, v: np.ndarray, m: Mask) -> None:
        """``binding[idx] = v`` on the lanes of ``m``, checking bounds and races."""
        name = b.binding.name
        if not self._inside(idx, b.length, m):
            self._oob(name, idx, b.length, m)
        lazy = v if isinstance(v, Strided) else None
        if self._probe is True and self.batch is not None:
            self._probe = self.batch.best_inner(idx)
        if m is None and b.owner is None and idx.shape[0] > 1:
            shape = self.affine(idx, b.length)
            writers = self.grid.writers(m) if shape is not None else None
            if writers is not None and b.defer(shape, writers):
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
        shape = self.affine(i, b.length) if len(i) > 1 else None
        if shape is not None:
            # Distinct indices in a strided pattern: views instead of gathers and scatters.
            dims = counts(shape)
            prev = strided(owner, shape)
            if prev.max() >= 0:
                self._check_owner(name, prev.reshape(-1), i, lanes)
            prev[...] = lanes.reshape(dims)
            _put(strided(b.data, shape), val, None)
            return
        rising = len(i) == 1 or bool((i[1:] > i[:-1]).all())
        if not rising and self.batch is not None and np.unique(i).size != i.size:
            raise Fallback(f"{name}: one element stored on several trips")
        prev = owner[i]
        if prev.max() >= 0:
            self._check_owner(name, prev, i, lanes)
        owner[i] = lanes
        if not rising:
            # Repeated indices within this store: the owner that stuck is not every writer's.
            back = owner[i]
            dup = back != lanes
            if dup.any():
                j = self._first_bad(dup)
                self._race_pair(name, int(i[j]), int(back[j]), int(lanes[j]), "write")
        b.data[i] = val

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

    def _check_owner(self, name: str, prev: np.ndarray, i: np.ndarray, lanes: np.ndarray) -> None:
        clash = (prev >= 0) & (prev != lanes)
        if clash.any():
            j = self._first_bad(clash)
            self._race_pair(
                name, int(broadcast(i, len(lanes))[j]), int(prev[j]), int(lanes[j]), "write"
            )

    def _race_pair(self, name: str, index: int, first: int, second: int, what: str) -> None:
        raise RaceError(
            f"{name}[{index}]: {self.grid.describe(first)} wrote it and "
            f"{self.grid.describe(second)} {what}s it in the same dispatch{self.where()}"
        )

    def load(self, b: Storage, idx: np.ndarray, m: Mask, view: bool = False):
        """``binding[idx]`` on the lanes of ``m`` (other lanes get any element); with ``view``,
        a read-only binding's strided elements may come back as a :class:`Strided` instead."""
        if not self._inside(idx, b.length, m):
            self._oob(b.binding.name, idx, b.length, m)
        if b.binding.access == "read_write" and (b.written or self.strict_init):
            self._check_read(b, idx, m)
        if is_uniform(idx):
            return b.data[int(idx[0]) : int(idx[0]) + 1].copy()
        shape = self.affine(idx, b.length)
        if shape is not None:
            if view and b.binding.access == "read":
                return Strided(strided(b.data, shape), idx.shape[0], len(shape[1]))
            v = strided(b.data, shape).reshape(idx.shape + b.data.shape[1:])
            return v.copy() if b.binding.access == "read_write" else v
        return np.take(b.data, idx, axis=0, mode="clip")

    def _check_read(self, b: Storage, idx: np.ndarray, m: Mask) -> None:
        lanes = self.grid.active(m)
        i = broadcast(idx, self.n)[lanes].astype(np.intp)
        lanes = self.grid.original(lanes)
        prev = b.owners()[i]
        if self.strict_init and (prev < 0).any():
            j = self._first_bad(prev < 0)
            raise UninitializedRead(
                f"{b.binding.name}[{int(i[j])}] is read by {self.grid.describe(int(lanes[j]))} "
                f"before anything in the dispatch wrote it{self.where()}"
            )
        clash = (prev >= 0) & (prev != lanes)
        if clash.any():
            j = self._first_bad(clash)
            self._race_pair(b.binding.name, int(i[j]), int(prev[j]), int(lanes[j]), "read")

    # ---- workgroup memory ----------------------------------------------------------------
    def _shared_at(self, w: SharedArray, idx: np.ndarray, m: Mask):
        """Active lanes, their dispatch-wide invocation ids and flat positions in ``w``."""
        self._oob(w.var.name, idx, w.length, m)
        active = self.grid.active(m)
        ids = self.grid.original(active)
        i = broadcast(idx, self.n)[active].astype(np.int64)
        return active, ids, (ids // self.grid.per_group - w.first) * w.length + i

    def _shared_race(self, w: SharedArray, flat: int, first: str, second: str) -> None:
        raise RaceError(
            f"{w.var.name}[{flat % w.length}] (workgroup memory): {first} and {second} "
            f"with no workgroupBarrier() between{self.where()}"
        )

    def shared_load(self, w: SharedArray, idx: np.ndarray, m: Mask) -> np.ndarray:
        """``w[idx]`` on the lanes of ``m``: each lane reads its own workgroup's row."""
        active, ids, flat = self._shared_at(w, idx, m)
        if self.strict_init and not w.written[flat].all():
            j = self._first_bad(~w.written[flat])
            raise UninitializedRead(
                f"{w.var.name}[{int(flat[j]) % w.length}] (workgroup memory) is read by "
                f"{self.grid.describe(int(ids[j]))} before anything in the dispatch wrote "
                f"it{self.where()}"
            )
        prev = w.owner[flat]
        clash = (prev >= 0) & (prev != ids)
        if clash.any():
            j = self._first_bad(clash)
            self._shared_race(
                w,
                int(flat[j]),
                f"{self.grid.describe(int(prev[j]))} wrote it",
                f"{self.grid.describe(int(ids[j]))} reads it",
            )
        r = w.reader[flat]
        new = np.where((r == -1) | (r == ids), ids, -2)
        w.reader[flat] = new
        back = w.reader[flat]
        w.reader[flat[back != new]] = -2  # two lanes of this load read one element
        got = w.data[flat]
        if m is None and len(active) == self.n:
            return got
        out = np.zeros((self.n,) + w.data.shape[1:], w.data.dtype)
        out[active] = got
        return out

    def shared_store(self, w: SharedArray, idx: np.ndarray, v: np.ndarray, m: Mask) -> None:
        """``w[idx] = v`` on the lanes of ``m``, checking races since the last barrier."""
        active, ids, flat = self._shared_at(w, idx, m)
        prev = w.owner[flat]
        clash = (prev >= 0) & (prev != ids)
        if clash.any():
            j = self._first_bad(clash)
            self._shared_race(
                w,
                int(flat[j]),
                f"{self.grid.describe(int(prev[j]))} wrote it",
                f"{self.grid.describe(int(ids[j]))} writes it",
            )
        r = w.reader[flat]
        clash = (r != -1) & (r != ids)
        if clash.any():
            j = self._first_bad(clash)
            who = "several invocations" if r[j] == -2 else self.grid.describe(int(r[j]))
            self._shared_race(
                w, int(flat[j]), f"{who} read it", f"{self.grid.describe(int(ids[j]))} writes it"
            )
        w.owner[flat] = ids
        back = w.owner[flat]
        dup = back != ids
        if dup.any():
            j = self._first_bad(dup)
            self._shared_race(
                w,
                int(flat[j]),
                f"{self.grid.describe(int(back[j]))} wrote it",
                f"{self.grid.describe(int(ids[j]))} writes it",
            )
        w.data[flat] = broadcast(v, self.n)[active]
        w.written[flat] = True

    def barrier(self, m: Mask) -> None:
        """``workgroupBarrier()``: every invocation of a workgroup must be here, or none."""
        p = self.grid.per_group
        if m is not None or self.grid.ids is not None or self.grid.n % p:
            ids = self.grid.original(self.grid.active(m))
            groups, counts = np.unique(ids // p, return_counts=True)
            bad = np.flatnonzero(counts != p)
            if bad.size:
                g = int(groups[bad[0]])
                raise InterpError(
                    f"workgroupBarrier() reached by {int(counts[bad[0]])} of {p} invocations of "
                    f"workgroup {self._wid(g)}: a barrier that some invocations of a workgroup "
                    f"do not reach is undefined in WGSL{self.where()}"
                )
        for w in self.shared.values():
            w.barrier()

    def _wid(self, g: int) -> tuple[int, int, int]:
        wx, wy, _ = self.grid.workgroups
        return (g % wx, g // wx % wy, g // (wx * wy))

    # ---- expressions ---------------------------------------------------------------------
    def eval(self, e: Expr, m: Mask):
        """The value of ``e`` on the lanes of ``m`` (other lanes hold arbitrary values)."""
        t = type(e)
        if t is Binary or t is Unary or t is Call or t is Convert:
            v = self._static_vals.get(id(e))
            if v is not None:
                return v
            if self.static(e):
                v = self._static_vals[id(e)] = self._eval(e, m)
                return v
        return self._eval(e, m)

    def static(self, e: Expr) -> bool:
        """Whether ``e`` is computed from literals, consts and params alone: the same value in
        every chunk and batch, so computed once (uniform, and never overwritten in place)."""
        k = id(e)
        known = self._static.get(k)
        if known is not None:
            return known
        match e:
            case Lit():
                ok = True
            case Name(name):
                ok = name in self.module and name not in self._locals
            case Member(Name("params"), _):
                ok = "params" not in self._locals
            case Unary(_, x) | Convert(_, x):
                ok = self.static(x)
            case Binary(_, a, b):
                ok = self.static(a) and self.static(b)
            case Call(_, args):
                ok = all(self.static(a) for a in args)
            case _:
                ok = False
        self._static[k] = ok
        return ok

    def _eval(self, e: Expr, m: Mask):
        match e:
            case Lit():
                v = self.lits.get(e)
                if v is None:
                    v = self.lits[e] = np.array([e.value], e.ty.dtype)
                return v
            case Name(name):
                if self._is_builtin(name):
                    cols = [self.grid.column(self.builtins[name], k) for k in range(3)]
                    lanes = max(c.shape[0] for c in cols)
                    return np.stack([broadcast(c, lanes) for c in cols], axis=1)
                v = self.lookup(name).value
                return ArrayValue(v) if isinstance(v, ArrayValue) else v
            case Unary(op, x):
                return self.apply(op, (self.eval(x, m),))
            case Binary(Op.LAND | Op.LOR as op, a, b):
                return self.logic(op, a, b, m)
            case Binary(op, a, b):
                x, y = self.eval(a, m), self.eval(b, m)
                f = _IN_PLACE.get(op)
                if f is not None and x.dtype == y.dtype and x.dtype.kind in "iu":
                    # A per-lane operand another integer operator just made is referenced
                    # nowhere else (uniform ones may be remembered, see :meth:`static`): the
                    # result can overwrite it instead of taking new memory.
                    fresh_a = type(a) is Binary and a.op not in _NOT_FRESH and x.shape[0] > 1
                    fresh_b = type(b) is Binary and b.op not in _NOT_FRESH and y.shape[0] > 1
                    if fresh_a and x.shape == y.shape or fresh_a and y.shape[0] == 1 == y.ndim:
                        return f(x, y, out=x)
                    if fresh_b and x.shape == y.shape:
                        return f(x, y, out=y)
                return self.apply(op, (x, y))
            case Call(op, args):
                return self.apply(op, tuple(self.eval(a, m) for a in args))
            case FnCall(name, args):
                return self.call(self.functions[name], [self.eval(a, m) for a in args], m)
            case Convert(ty, x):
                return convert(self.eval(x, m), ty)
            case Construct(ty, args):
                return self.construct(ty, [self.eval(a, m) for a in args])
            case Index(Name(name), index) if name in self.buffers and not self._shadowed(name):
                want, self._want_view = self._want_view, False
                idx = self.eval(index, m)
                self._last_load = (index, m, self.scopes, idx)
                return self.load(self.buffers[name], idx, m, want)
            case Index(Name(name), index) if name in self.shared and not self._shadowed(name):
                return self.shared_load(self.shared[name], self.eval(index, m), m)
            case Index(base, index):
                container = self.eval(base, m)
                idx = self.eval(index, m)
                return self.element(container, idx, m, base)
            case Member(Name("params"), field) if not self._shadowed("params"):
                return self.params[field]
            case Member(Name(name), comp) if len(comp) == 1 and self._is_builtin(name):
                return self.grid.column(self.builtins[name], COMPONENTS.index(comp))
            case Member(base, comps):
                v = self.eval(base, m)
                if len(comps) == 1:
                    return v[:, COMPONENTS.index(comps)]
                return v[:, [COMPONENTS.index(c) for c in comps]]
        raise InterpError(f"not an expression: {e!r}{self.where()}")

    def _is_builtin(self, name: str) -> bool:
        # The entry point's builtins live in its outermost scope, out of sight of helpers.
        return (
            name in self.builtins
            and self.frame is self.main
            and not any(name in scope for scope in self.scopes[2:])
        )

    def element(self, container, idx: np.ndarray, m: Mask, base: Expr):
        """Element ``idx`` of an array or vector value."""
        length = len(container) if isinstance(container, ArrayValue) else container.shape[1]
        self._oob(show(base), idx, length, m)
        if is_uniform(idx):
            i = int(idx[0])
            return container[i] if isinstance(container, ArrayValue) else container[:, i]
        safe = np.clip(idx, 0, length - 1).astype(np.intp)
        if isinstance(container, ArrayValue):
            lanes = max(max(x.shape[0] for x in container), self.n)
            stacked = np.stack([broadcast(x, lanes) for x in container])
            return stacked[safe, self.grid.lanes]
        return broadcast(container, self.n)[self.grid.lanes, safe]

    def logic(self, op: Op, a: Expr, b: Expr, m: Mask) -> np.ndarray:
        """Short-circuit ``&&`` / ``||``: ``b`` runs only on lanes where ``a`` does not decide."""
        x = self.eval(a, m)
        rest = m_and(m, x, self.n) if op == Op.LAND else m_andnot(m, x, self.n)
        if empty(rest):
            return x
        y = self.eval(b, rest)
        return (x & y) if op == Op.LAND else (x | y)

    def apply(self, op: Op, args: tuple[np.ndarray, ...]) -> np.ndarray:
        """The op table's numpy implementation, scalars widened against vectors."""
        if (op is Op.DIV or op is Op.MOD) and args[0].dtype == np.uint32 and args[1].size == 1:
            # u32 by a uniform power of two: exactly a shift or a mask, and much cheaper.
            d = int(args[1].reshape(-1)[0])
            if d and not d & (d - 1):
                a = args[0]
                if op is Op.DIV:
                    return a >> np.uint32(d.bit_length() - 1)
                return a & np.uint32(d - 1)
        if len(args) == 2:
            a, b = args
            fast = _INT_FAST.get(op)
            if (
                fast is not None
                and a.dtype == b.dtype
                and a.dtype.kind in "iu"
                and a.ndim == b.ndim
            ):
                # Integer arrays wrap modulo 2^32 in numpy as in WGSL, silently: no error state
                # or dtype work needed.
                return fast(a, b)
        nd = max(a.ndim for a in args)
        if any(a.ndim != nd for a in args):
            args = tuple(a.reshape(a.shape + (1,) * (nd - a.ndim)) for a in args)
        return ops.TABLE[op].impl(*args)

    def construct(self, ty, parts: list):
        if isinstance(ty, Array):
            return ArrayValue(parts)
        lanes = max(p.shape[0] for p in parts)
        cols = [broadcast(p, lanes).reshape(lanes, -1) for p in parts]
        return np.concatenate(cols, axis=1).astype(ty.elem.dtype, copy=False)

    def call(self, fn: Function, args: list, m: Mask):
        """Inline a helper: its body runs on the caller's lanes with a fresh scope and frame."""
        caller = (self.scopes, self.frame, self.current)
        self.scopes = [self.module, {p: Slot(a) for (p, _), a in zip(fn.params, args)}]
        self.frame = Frame(m)
        try:
            self.block(fn.body, m)
            return self.frame.result
        finally:
            self.scopes, self.frame, self.current = caller
