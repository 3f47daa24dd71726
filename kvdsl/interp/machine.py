"""The interpreter proper: statement execution and control flow over every invocation at once.

:class:`Machine` runs one dispatch: the entry point chunk by chunk, statements under masks,
loops (batched through :mod:`kvdsl.interp.batch` where they qualify), switches and returns. It
is assembled from mixins that each hold one job: :class:`~kvdsl.interp.scope.Scopes` (name
lookup), :class:`~kvdsl.interp.exprs.Expressions` (expression evaluation),
:class:`~kvdsl.interp.memory.Memory` (loads, stores, bounds and race checks, workgroup memory
and barriers), :class:`~kvdsl.interp.structs.StructMemory` (memory held as words) and
:class:`~kvdsl.interp.assign.Assignment` (assignment to names, vars and their elements).

See :mod:`kvdsl.interp` for the semantics these modules implement.
"""

from __future__ import annotations

import numpy as np

from kvdsl.emit import emit_expr, inline
from kvdsl.interp import batch
from kvdsl.interp.assign import Assignment
from kvdsl.interp.batch import BatchGrid
from kvdsl.interp.buffers import SharedArray, Storage, TextureMemory
from kvdsl.interp.errors import InterpError, WorkBudget
from kvdsl.interp.exprs import Expressions
from kvdsl.interp.memory import Memory
from kvdsl.interp.races import Sync
from kvdsl.interp.scope import Frame, Scopes, Slot
from kvdsl.interp.structs import StructMemory, by_words
from kvdsl.interp.values import (
    ArrayValue,
    Grid,
    Mask,
    broadcast,
    empty,
    is_uniform,
    m_and,
    m_andnot,
    m_or,
    merge,
    normal,
    sel,
)
from kvdsl.ir import tree as ir
from kvdsl.ir.types import Struct, workgroup_words
from kvdsl.ir.show import show

#: The statements one chunk of a dispatch may run (``run``'s ``max_steps``) before the
#: interpreter takes it for a loop that never ends: a few seconds of unbatched trips.
MAX_STEPS = 1 << 18
# Invocations per chunk: big enough that numpy's per-call overhead is small against the work,
# small enough that a chunk's arrays are reused from the allocator instead of page-faulted in.
CHUNK = 1 << 18


#: Facts of a kernel that do not change between its dispatches, by the kernel's identity (the
#: kernel is kept with them, so the identity is not reused): a session dispatches one kernel
#: thousands of times.
_FACTS: dict[int, tuple[ir.Kernel, bool, frozenset[str]]] = {}


def _facts(kernel: ir.Kernel) -> tuple[bool, frozenset[str]]:
    """:func:`reads_read_write` and the names of the kernel's locals, computed once."""
    known = _FACTS.get(id(kernel))
    if known is None or known[0] is not kernel:
        names = {
            x.name
            for x in ir.walk((kernel.body, kernel.functions))
            if isinstance(x, (ir.Let, ir.Var))
        }
        names |= {p for f in kernel.functions for p, _ in f.params}
        names |= {p for p, _ in kernel.builtins}
        names |= {v.name for v in kernel.private_vars}  # module-scope, but per invocation
        if len(_FACTS) > 256:
            _FACTS.clear()
        known = _FACTS[id(kernel)] = (kernel, _reads_read_write(kernel), frozenset(names))
    return known[1], known[2]


def _through(kernel: ir.Kernel) -> frozenset[int]:
    """The ids of the kernel's expressions that read through a pointer: every ``Deref``, and
    every ``Index`` or ``Member`` whose access chain starts at one."""
    out = set()
    for x in ir.walk((kernel.body, kernel.functions)):
        root = x
        while type(root) is ir.Index or type(root) is ir.Member:
            root = root.base
        if type(root) is ir.Deref:
            out.add(id(x))
    return frozenset(out)


def uses_pointers(kernel: ir.Kernel) -> bool:
    """Whether ``kernel`` takes an address anywhere (its helpers included)."""
    return any(type(x) is ir.AddressOf for x in ir.walk((kernel.body, kernel.functions)))


def reads_read_write(kernel: ir.Kernel) -> bool:
    """Whether ``kernel`` may read a read_write binding: any index of one's name that is not the
    target of a plain ``=`` (a shadowing local counts too, which only errs on the safe side)."""
    return _facts(kernel)[0]


def _reads_read_write(kernel: ir.Kernel) -> bool:
    rw = {b.name for b in kernel.bindings if b.access == "read_write"}

    def reads(node) -> bool:
        if isinstance(node, ir.Assign) and node.op is None and isinstance(node.target, ir.Index):
            return reads(node.target.index) or reads(node.value)
        if isinstance(node, ir.Index) and isinstance(node.base, ir.Name) and node.base.name in rw:
            return True
        if isinstance(node, ir.AddressOf):  # a pointer into a read_write binding may read it
            root = node.x
            while isinstance(root, (ir.Index, ir.Member)):
                root = root.base
            if isinstance(root, ir.Name) and root.name in rw:
                return True
        if isinstance(node, tuple):
            return any(reads(x) for x in node)
        if hasattr(node, "__dataclass_fields__"):
            return any(reads(getattr(node, f)) for f in node.__dataclass_fields__)
        return False

    return reads((kernel.body, kernel.functions))


def _struct_values(kernel: ir.Kernel) -> bool:
    """Whether ``kernel`` builds or declares a struct value at function scope."""
    return any(
        (type(x) is ir.Construct or type(x) is ir.Var) and isinstance(x.ty, Struct)
        for x in ir.walk((kernel.body, kernel.functions))
    )


def render(s: ir.Stmt | None) -> str:
    """A statement as one line of WGSL, for messages: a simple one as the emitter prints it, an
    ``if`` or ``for`` as its header."""
    match s:
        case ir.If(cond):
            return f"if ({emit_expr(cond)})"
        case ir.Loop():
            return "loop"
        case ir.For(init, cond, update):
            return (
                f"for ({inline(init)}; {'' if cond is None else emit_expr(cond)}; {inline(update)})"
            )
        case (
            None
            | ir.Let()
            | ir.Var()
            | ir.Assign()
            | ir.Return()
            | ir.Break()
            | ir.Continue()
            | ir.Barrier()
            | ir.CallStmt()
            | ir.AtomicStmt()
            | ir.TextureStore()
        ):
            return inline(s)
        case _:
            return show(s)


class Machine(Scopes, Expressions, Memory, StructMemory, Assignment):
    """Runs one dispatch of a kernel."""

    def __init__(
        self,
        kernel: ir.Kernel,
        grid: Grid,
        buffers: dict[str, Storage],
        params: dict[str, np.ndarray],
        strict_init: bool,
        source_lines: dict[int, int] | None,
        batching: bool = True,
        max_steps: int = MAX_STEPS,
        loop_trips: dict | None = None,
        uniforms: dict[str, object] | None = None,
    ) -> None:
        self.kernel = kernel
        # The work budget: statements run in this chunk, against ``max_steps``.
        self.steps, self.max_steps = 0, max_steps
        # Loop trips of this chunk, all loops together (see :meth:`count_trips`).
        self.trips, self.loop_trips = 0, loop_trips
        self.grid = grid
        self.n = grid.n
        self.buffers = buffers
        self.params = params
        self.strict_init = strict_init
        self.source_lines = source_lines or {}
        self.functions: dict[str, ir.Function] = {f.name: f for f in kernel.functions}
        self.builtins = {p: ir.BUILTIN_INPUTS[kind] for p, kind in kernel.builtins}
        self.module: dict[str, Slot] = {}
        self.scopes: list[dict[str, Slot]] = [self.module]
        self.frame = self.main = Frame(None)
        self.lits: dict[ir.Lit, np.ndarray] = {}
        self.shared: dict[str, SharedArray] = {}  # the chunk's workgroup memory
        self.textures: dict[str, TextureMemory] = {}  # the dispatch's storage textures
        self.sync = Sync(grid.total // grid.per_group, grid.per_group, grid.total)
        self.current: ir.Stmt | None = None
        self._affine: list[tuple] = []  # the last few index arrays :meth:`affine` looked at
        # Bindings and workgroup arrays of structs or matrices, held as words
        # (kvdsl.interp.structs); their loops run unbatched.
        self._structs = any(by_words(b) for b in kernel.bindings) or any(
            workgroup_words(w.ty) for w in kernel.workgroup_vars
        )
        self.batching = batching and not self._structs and not _struct_values(kernel)
        self.batched = False  # whether a loop ran batched (see :mod:`kvdsl.interp.batch`)
        self.batch: BatchGrid | None = None  # the grid of the batch running now
        self._plans: dict[int, batch.Plan | None] = {}
        self._orders: dict[int, int | None] = {}  # per batched loop: lane block (None: trips)
        self._last_load: tuple | None = None  # (index expr, mask, scopes, index) of a load
        self._want_view = False  # the next binding load may return a :class:`Strided`
        self._static: dict[int, bool] = {}  # per expression node: see :meth:`static`
        self._static_vals: dict[int, np.ndarray] = {}
        self._locals = set(_facts(kernel)[1])
        self._probe: bool | int | None = False  # True: the next store picks the lane order
        self._repeated: dict[int, tuple[Slot, Slot]] = {}  # outside slots, repeated per trip
        # binding name → [bytes loaded, bytes stored] by active lanes, when the caller asks.
        self.accesses: dict[str, list[int]] | None = None
        # Pointers: the expressions read through one (``*p``, ``(*p)[i]``, ``(*p).x``).
        self._through = _through(kernel)
        self._pointer_ids = 0
        self._pointers = uses_pointers(kernel)
        for c in kernel.consts:
            self.module[c.name] = Slot(self.eval(c.value, None))
        for u in kernel.uniforms:  # read only, the same in every invocation, like a const
            self.module[u.name] = Slot((params if uniforms is None else uniforms)[u.name])
        if kernel.params is not None:  # the params as one struct value, for &params
            self.module["params"] = Slot({n: params[n] for n, _ in kernel.params.fields})

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
            self.grid = Grid(full.workgroups, full.size, start, stop, full.subgroup_size)
            self.n = self.grid.n
            p = full.per_group
            self.shared = {
                w.name: SharedArray(w, (stop - start) // p, start // p)
                for w in self.kernel.workgroup_vars
            }
            for v in self.kernel.private_vars:  # each invocation's own, from its initialiser
                init = self.zero(v.ty) if v.init is None else self.eval(v.init, None)
                self.module[v.name] = Slot(init, None, var=True)
            self.scopes = [self.module, {}]
            self.frame = self.main = Frame(None)
            self.steps = self.trips = 0
            self.block(self.kernel.body, None)

    def count_trips(self, s: ir.For | ir.Loop, k: int) -> None:
        """Count ``k`` more trips of loop ``s`` (a trip that ends the loop counts too). With
        every invocation of the chunk in lockstep, the chunk's count is at least the trips any
        one invocation (or a group of them run together) makes; ``loop_trips``, when the caller
        asks, keeps the most of any chunk as ``"most"``, and the loop whose trip first took a
        chunk's count past ``loop_trips["mark"]`` as ``"past"``."""
        self.trips += k
        lt = self.loop_trips
        if lt is None:
            return
        if self.trips > lt.get("most", 0):
            lt["most"] = self.trips
        if self.trips > lt.get("mark", self.trips) and "past" not in lt:
            lt["past"] = s

    # ---- errors --------------------------------------------------------------------------
    def where(self, s: ir.Stmt | None = None) -> str:
        """`` in `statement` (line N)`` of ``s``, by default the statement running now."""
        s = self.current if s is None else s
        if s is None:
            return ""
        line = self.source_lines.get(id(s))
        return f" in `{render(s)}`" + ("" if line is None else f" (line {line})")

    # ---- statements ----------------------------------------------------------------------
    def block(self, body: tuple[ir.Stmt, ...], m: Mask) -> Mask:
        """Run ``body`` on the lanes of ``m``; the lanes that reach its end."""
        top = body is self.kernel.body
        for s in body:
            out = self.stmt(s, m)
            if out is not m:
                if empty(out):
                    return out
                m = out
                if (
                    top
                    and m is not None
                    and not self._pointers  # a pointer's held indices are not compacted
                    and 4 * int(np.count_nonzero(m)) <= 3 * self.n
                ):
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
            if type(v) is dict:  # frexp's or modf's result
                return {k: take(x) for k, x in v.items()}
            return v if v is None or v.shape[0] == 1 else v[keep]

        for scope in self.scopes[1:]:
            for slot in scope.values():
                slot.value, slot.decl = take(slot.value), None
        self.frame.done = None
        self.grid.compact(keep)
        self.n = self.grid.n

    def scoped(self, body: tuple[ir.Stmt, ...], m: Mask) -> Mask:
        self.scopes.append({})
        try:
            return self.block(body, m)
        finally:
            self.scopes.pop()

    def stmt(self, s: ir.Stmt, m: Mask) -> Mask:
        """Run one statement; return the lanes that continue after it."""
        self.current = s
        self.steps += 1
        match s:
            case ir.Let(name, value):
                self.declare(name, Slot(self.eval(value, m)))
                return m
            case ir.Var(name, ty, init):
                value = self.zero(ty) if init is None else self.eval(init, m)
                self.declare(name, Slot(value, m, var=True))
                return m
            case ir.Assign(target, value, op):
                self._last_load = None
                # ``dst[x] = src[y]`` on every lane may copy buffer to buffer, not via an array.
                self._want_view = (
                    m is None
                    and op is None
                    and type(value) is ir.Index
                    and type(target) is ir.Index
                    and type(target.base) is ir.Name
                    and target.base.name in self.buffers
                )
                v = self.eval(value, m)
                self._want_view = False
                if op is not None:
                    v = self.apply(op, (self.eval(target, m), v))
                self.assign(target, v, m)
                return m
            case ir.If(cond, then, orelse):
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
            case ir.For() | ir.Loop():
                return self.loop(s, m)
            case ir.Break():
                return np.zeros(self.n, bool)
            case ir.Continue():
                cont = self.frame.loops[-1]
                cont[0] = m_or(cont[0], m) if cont[0] is not False else m
                return np.zeros(self.n, bool)
            case ir.Return(value):
                self.ret(value, m)
                return np.zeros(self.n, bool)
            case ir.Block(body):
                return self.scoped(body, m)
            case ir.Comment():
                return m
            case ir.Barrier(space):
                self.barrier(m, space)
                return m
            case ir.CallStmt(call):
                self.eval(call, m)
                return m
            case ir.AtomicStmt(call):
                self.atomic(call, m)
                return m
            case ir.TextureStore(name, coords, value, layer):
                self.texture_store(
                    self.texture_of(name), self.texel_at(coords, layer, m), self.eval(value, m), m
                )
                return m
            case ir.Switch():
                return self.switch(s, m)
            case ir.ConstAssert():
                return m  # checked when the kernel was verified
        raise InterpError(f"not a statement: {s!r}")

    def loop(self, s: ir.For | ir.Loop, m: Mask) -> Mask:
        """``for``/``loop``: each trip runs the body on the lanes still looping.

        A lane leaves at a false condition, ``break`` or ``return``; ``continue`` skips to the
        update. After the loop every lane that entered goes on, except those that returned.
        """
        if isinstance(s, ir.For) and self.batching and self.batch is None:
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
                if isinstance(s, ir.For)
                else (None,) * 3 + (s.body,)
            )
            continuing = (
                s.continuing
                if isinstance(s, ir.Loop) and (s.continuing or s.break_if is not None)
                else None
            )
            if init is not None:
                self.stmt(init, m)
            lm = m
            while True:
                self.count_trips(s, 1)
                if self.steps > self.max_steps:
                    self.current = s
                    raise WorkBudget(
                        f"kernel {self.kernel.name}: {self.trips:,} loop trips and "
                        f"{self.steps:,} statements without ending{self.where()}, past the "
                        f"interpreter's budget of {self.max_steps:,} statements (--max-steps, "
                        "or run's max_steps, raises it)"
                    )
                if cond is not None:
                    self.current = s
                    lm = m_and(lm, self.eval(cond, lm), self.n)
                    if empty(lm):
                        break
                cont[0] = False
                if continuing is None:
                    out = self.scoped(body, lm)
                else:
                    self.scopes.append({})  # the continuing block sees the body's names
                    out = self.block(body, lm)
                if cont[0] is False:
                    nxt = out
                else:
                    nxt = cont[0] if empty(out) else m_or(out, cont[0])
                if continuing is not None:
                    try:
                        if not empty(nxt):
                            self.block(continuing, nxt)  # it cannot leave: verify says so
                            if s.break_if is not None:
                                self.current = s
                                nxt = m_andnot(nxt, self.eval(s.break_if, nxt), self.n)
                    finally:
                        self.scopes.pop()
                if nxt is not lm:
                    if empty(nxt):
                        break
                    nxt = normal(nxt)
                if update is not None:
                    self.stmt(update, nxt)
                lm = nxt
        finally:
            frame.loops.pop()
            self.scopes.pop()
        if frame.returned == returned:
            return m
        return normal(~frame.done if m is None else m & ~frame.done)

    def switch(self, s: ir.Switch, m: Mask) -> Mask:
        """Each lane of ``m`` runs the clause whose selector equals its value (else the
        ``default`` one); a ``break`` leaves the switch. After it, every lane that entered goes
        on except those that returned or continued the enclosing loop."""
        frame = self.frame
        returned = frame.returned
        v = self.eval(s.selector, m)
        lanes = np.ones(self.n, bool) if m is None else m
        v = broadcast(v, self.n)
        taken = np.zeros(self.n, bool)
        picks: list[tuple[ir.Case, np.ndarray]] = []
        default = None
        for case in s.cases:
            hit = np.zeros(self.n, bool)
            for e in case.selectors:
                if e is None:
                    default = case
                else:
                    hit |= broadcast(self.eval(e, m), self.n) == v
            hit &= lanes & ~taken
            taken |= hit
            picks.append((case, hit))
        picks = [(c, hit | (lanes & ~taken) if c is default else hit) for c, hit in picks]
        for case, hit in picks:
            if hit.any():
                self.scoped(case.body, normal(hit))
        out = lanes
        if frame.returned != returned and frame.done is not None:
            out = out & ~frame.done
        if frame.loops and frame.loops[-1][0] is not False:
            out = out & ~(
                np.ones(self.n, bool) if frame.loops[-1][0] is None else frame.loops[-1][0]
            )
        return normal(out) if out is not lanes else m

    def batched_loop(self, s: ir.For, p: batch.Plan, m: Mask) -> bool:
        """Run ``s`` in batches (:func:`kvdsl.interp.batch.run_batched`); False, having run
        nothing, when its values rule batching out."""
        return batch.run_batched(self, s, p, m)

    def ret(self, value: ir.Expr | None, m: Mask) -> None:
        frame = self.frame
        frame.returned += 1
        lanes = np.ones(self.n, bool) if m is None else m
        frame.done = lanes if frame.done is None else frame.done | lanes
        if value is None:
            return
        v = self.eval(value, m)
        if frame.result is None and m is frame.entry:
            frame.result = v
        elif type(v) is dict:  # a struct value: member by member
            frame.result = v if frame.result is None else merge(lanes, v, frame.result)
        else:
            old = frame.result if frame.result is not None else np.zeros_like(v)
            frame.result = sel(lanes, v, old)
