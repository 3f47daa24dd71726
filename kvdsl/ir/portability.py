"""What some WebGPU implementation runs other than WGSL says: the constructs of a kernel that
met such a deviation on a real GPU, each with the statement it is in.

Found by generated kernels run on an H200 under wgpu-native and Dawn, and on llvmpipe, against
the interpreter (``tests/interp/test_exec_fuzz.py``, ``tests/interp/test_exec_fuzz_float.py``;
``docs/performance.md``, *Integer kernels on the H200* and the sections after it). The
kernel is valid WGSL and means what the interpreter says; on those platforms it runs otherwise,
so ``kvdsl check`` names them as notes (not problems) and a host can decide.
"""

from __future__ import annotations

from typing import Any, get_args

from kvdsl.ir import tree as ir
from kvdsl.ir.ops import Op
from kvdsl.ir.types import Ptr, Vec, array_leaf, bool_, i32
from kvdsl.ir.scope import Scope
from kvdsl.ir.verify import Verifier, verify

SIGNED_REMAINDER = (
    "a % of i32 values: wgpu-native 0.32 (and Firefox's wgpu before gfx-rs/wgpu#9674) lowers "
    "it to SPIR-V OpSRem, which Vulkan leaves undefined for a negative operand; on NVIDIA "
    "-7 % 2 gives 1 where WGSL says -1"
)
MAX_OF_ABS = (
    "an i32 max or min of an abs: under Dawn on an NVIDIA H200 the abs was sometimes dropped "
    "(max(a, abs(b)) ran as max(a, b)), depending on the rest of the module"
)
ABS_NOT_NEGATIVE = (
    "an i32 abs: WGSL leaves i32's least value as its own abs, and NVIDIA's Vulkan driver (580) "
    "on an H200 under wgpu-native took an abs as never negative: for that value abs(m) < 0i, "
    "(abs(m) >> 31u) == -1i and u32(abs(m)) > 2147483647u came out false, and 0i < abs(m) "
    "true in a helper"
)

SELECT_DIVISOR = (
    "an integer vector division or remainder by a select of two constant vectors: NVIDIA's "
    "Vulkan driver (580) on an H200 divided a lane by 1 where the chosen vector held "
    "4294967295u and the other 0u (31u / 4294967295u gave 31u where WGSL gives 0u), under "
    "both wgpu-native and Dawn; a scalar select ran right"
)

#: Not noted by :func:`hazards`: no shape of its own was found (the same loop alone, or
#: unrolled, ran right; the driver's answer depends on the rest of the module).
LOOP_SUM_WRAP = (
    "an i32 var summed in a loop past i32's range: WGSL wraps (2147483647i plus twice the "
    "least value is 2147483647i); NVIDIA's Vulkan driver (580) on an H200 under Dawn left the "
    "least value in one generated kernel, not in the same loop in a module of its own"
)

CONSTANT_UNPACK = (
    "unpack2x16float of a word the compiler knows (literals, consts, lets of them, a var not "
    "yet assigned): on llvmpipe (Mesa 22.3, the software Vulkan driver CI runs) its high lane "
    "(.y) comes out 0.0; a word computed at run time unpacks right"
)

PACK_NORM_TIES = (
    "pack4x8unorm, pack4x8snorm, pack2x16unorm or pack2x16snorm: WGSL says floor(0.5 + 255 * "
    "e) (127, 65535, 32767 for the others), so a component exactly halfway between two codes "
    "rounds up; naga lowers them to SPIR-V's PackUnorm4x8 and the like, whose rounding of a "
    "tie is the driver's; llvmpipe (Mesa 22.3) and NVIDIA's (580, on an H100) round it to even: "
    "pack4x8unorm of 0.3f (76.5 codes) gives 76 where WGSL says 77"
)

#: Noted by ``kvdsl check`` from the WGSL text (the IR holds the f16 value itself:
#: :func:`kvdsl.frontend.parse_with_lines`'s ``rounded``), not by :func:`hazards`.
ROUNDED_F16 = (
    "an f16 literal whose digits are not an f16 value: WGSL lets an implementation round it "
    "either way, and Tint (Dawn, Chrome) rounds it toward zero where naga (wgpu-native) and the "
    "interpreter round to nearest: under Dawn on an H200, 31.62h gave 31.609375, under "
    "wgpu-native 31.625; write the value's exact digits (kvdsl's printer does)"
)

SELECT_OF_ITS_CONDITION = (
    "a bool select(a && c, b || c, c), its condition the right operand of an && in the false "
    "arm and of an || in the true one: NVIDIA's Vulkan driver (580) on an H200 ran it as "
    "select(a, b, c) under both wgpu-native and Dawn (c && a, c || b ran right, as did the "
    "same choice written as an if)"
)


_PACK_NORM = frozenset((Op.PACK4X8UNORM, Op.PACK4X8SNORM, Op.PACK2X16UNORM, Op.PACK2X16SNORM))


POINTER_PARAMETER = (
    "a call passing a workgroup, storage or uniform pointer: WGSL's "
    "unrestricted_pointer_parameters "
    "(Tint takes it); naga in wgpu-native 29 refuses the helper ('a pointer of space ... can't "
    "be passed into functions')"
)
ELEMENT_POINTER_ARGUMENT = (
    "a function pointer to an array's element passed to a helper (f(&a[i])): naga 29's SPIR-V "
    "writer aborts the process on it ('Expression is not cached'); pass the whole array"
)


def _pointer_hazards(e: ir.FnCall, fn: ir.Function | None) -> list[str]:
    """What wgpu-native's naga does with the pointer arguments of helper call ``e``."""
    out = []
    if fn is not None and any(
        isinstance(t, Ptr)
        and (
            t.space in ("workgroup", "storage")
            # a whole uniform (&params) is specialised away (kvdsl.ir.handles)
            or t.space == "uniform"
            and not (type(a) is ir.AddressOf and type(a.x) is ir.Name)
        )
        for a, (_, t) in zip(e.args, fn.params)
    ):
        out.append(POINTER_PARAMETER)
    for a, (_, t) in zip(e.args, fn.params if fn is not None else ()):
        local = isinstance(t, Ptr) and t.space in ("function", "private")
        if local and type(a) is ir.AddressOf and type(a.x) in (ir.Index, ir.Member):
            out.append(ELEMENT_POINTER_ARGUMENT)
    return out


def naga_aborts(kernel: ir.Kernel) -> str | None:
    """Why naga (wgpu-native 29) would abort the process compiling ``kernel`` (a valid one),
    or None: a function pointer to an array's element passed to a helper."""
    functions = {f.name: f for f in kernel.functions}
    for x in ir.walk((kernel.body, kernel.functions)):
        if type(x) is ir.FnCall and ELEMENT_POINTER_ARGUMENT in _pointer_hazards(
            x, functions.get(x.name)
        ):
            return ELEMENT_POINTER_ARGUMENT
    return None


def _signed(ty: Any) -> bool:
    return ty is i32 or (isinstance(ty, Vec) and ty.elem is i32)


class _Watch(Verifier):
    """The verifier, noting each hazardous expression with its innermost statement."""

    def __init__(self, kernel: ir.Kernel) -> None:
        super().__init__(kernel)
        self.now: ir.Stmt | None = None
        self.found: list[tuple[ir.Stmt | None, str]] = []
        self.seen: set[tuple[int, str]] = set()  # by the statement's identity: two equal
        # statements on two lines are two notes
        self.fixed: set[str] = set()  # lets whose value is fixed when the shader compiles

    def note(self, why: str) -> None:
        if (id(self.now), why) not in self.seen:
            self.seen.add((id(self.now), why))
            self.found.append((self.now, why))

    def stmt(self, s: ir.Stmt, scope: Scope, ret: Any, loop: bool) -> None:
        outer, self.now = self.now, s
        try:
            super().stmt(s, scope, ret, loop)
            if (
                type(s) is ir.Assign
                and s.op in (Op.DIV, Op.MOD)
                and self._select_divisor(s.value, scope)
            ):
                self.note(SELECT_DIVISOR)
            if type(s) is ir.Let:  # by name: a later let of the name (another block's) replaces it
                (self.fixed.add if self._fixed(s.value, scope) else self.fixed.discard)(s.name)
            if type(s) is ir.Assign and s.op is Op.MOD and _signed(self.type_of(s.value, scope)):
                self.note(SIGNED_REMAINDER)
        finally:
            self.now = outer

    def type_of(self, e: Any, scope: Scope) -> Any:
        ty = super().type_of(e, scope)
        if type(e) is ir.Binary and e.op in (Op.DIV, Op.MOD) and self._select_divisor(e.b, scope):
            self.note(SELECT_DIVISOR)
        if type(e) is ir.Binary and e.op is Op.MOD and _signed(ty):
            self.note(SIGNED_REMAINDER)
        elif (
            type(e) is ir.Call
            and e.op in (Op.MAX, Op.MIN, Op.CLAMP)
            and _signed(ty)
            and any(type(a) is ir.Call and a.op is Op.ABS for a in e.args)
        ):
            self.note(MAX_OF_ABS)
        elif type(e) is ir.Call and e.op is Op.ABS and _signed(ty):
            self.note(ABS_NOT_NEGATIVE)
        elif type(e) is ir.Call and e.op is Op.UNPACK2X16FLOAT and self._fixed(e.args[0], scope):
            self.note(CONSTANT_UNPACK)
        elif type(e) is ir.Call and e.op in _PACK_NORM:
            self.note(PACK_NORM_TIES)
        elif type(e) is ir.Call and select_of_its_condition(e):
            self.note(SELECT_OF_ITS_CONDITION)
        return ty

    def call_type(self, e: ir.FnCall, scope: Scope) -> Any:
        ret = super().call_type(e, scope)  # a call statement's too
        for why in _pointer_hazards(e, self.functions.get(e.name)):
            self.note(why)
        return ret

    def _select_divisor(self, e: Any, scope: Scope) -> bool:
        """Whether ``e`` (a divisor), its conversions aside, is a select of two vectors each
        fixed when the shader compiles (``vec2<u32>(select(vec2<i32>(0i, 0i),
        vec2<i32>(0i, -1i), vb))``)."""
        while type(e) is ir.Convert:
            e = e.x
        if type(e) is not ir.Call or e.op is not Op.SELECT:
            return False
        f, t, _ = e.args
        return all(
            type(a) is ir.Construct and isinstance(a.ty, Vec) and self._fixed(a, scope)
            for a in (f, t)
        )

    def _fixed(self, e: Any, scope: Scope) -> bool:
        """Whether ``e`` reads nothing at run time: literals, module consts and lets of them,
        and operators, builtins, conversions and constructors over those. A ``var`` is not
        (it may change), though a compiler may know one not yet assigned, as llvmpipe does. The
        lanes a swizzle takes of a vector built lane by lane count, not the others
        (``vec4<f32>(0.0f, 0.5f, a, a).xy`` is fixed); a compiler may still know more."""
        t = type(e)
        if t is ir.Lit:
            return True
        if t is ir.Name:
            sym = scope.visible.get(e.name)
            return e.name in self.fixed or (sym is not None and sym.kind == "const")
        if t is ir.Unary or t is ir.Convert or t is ir.Bitcast:
            return self._fixed(e.x, scope)
        if t is ir.Binary:
            return self._fixed(e.a, scope) and self._fixed(e.b, scope)
        if t is ir.Call or t is ir.Construct:
            return all(self._fixed(a, scope) for a in e.args)
        if t is ir.Member:
            base = e.base
            if (
                type(base) is ir.Construct
                and isinstance(base.ty, Vec)
                and len(base.args) == base.ty.n  # one scalar a lane
                and set(e.name) <= set("xyzw"[: base.ty.n])
            ):  # only the lanes taken count: vec4<f32>(0.0f, 0.5f, a, a).xy is fixed
                return all(self._fixed(base.args["xyzw".index(c)], scope) for c in e.name)
            return self._fixed(base, scope)
        return False


def select_of_its_condition(e: ir.Call) -> bool:
    """Whether ``e``, a call, is ``select(a && c, b || c, c)`` (bool arms; ``&``/``|`` too)."""
    if e.op is not Op.SELECT:
        return False
    f, t, c = e.args
    return (
        type(f) is ir.Binary
        and f.op in (Op.LAND, Op.AND)
        and f.b == c
        and type(t) is ir.Binary
        and t.op in (Op.LOR, Op.OR)
        and t.b == c
    )


BOOL_WORKGROUP = (
    "a read of a bool array in workgroup memory: on an H100 under wgpu-native (NVIDIA 580) an "
    "element another invocation stored as true read back as false after the barrier, in arrays "
    "of one, two and three levels and through a select, a let or an if alike; the same flags "
    "as u32 values ran right"
)

OTHER_WORKGROUPS_WRITES = (
    "a read of storage the kernel writes, after an atomic whose result it uses: WGSL's atomics "
    "are relaxed and storageBarrier orders a workgroup's own accesses only, so the values other "
    "workgroups wrote before their atomic need not be visible here (a split-K product whose "
    "last workgroup merged the partials read NaN partials on 4 of 100 rows on an H100 under "
    "wgpu-native); merge in a second dispatch"
)


_STMTS = frozenset(get_args(ir.Stmt))


def _root(e: Any) -> str | None:
    """The name an element access ``e`` (``a[i].m[j]``) starts from, if any (None: ``e`` is
    None)."""
    while type(e) in (ir.Index, ir.Member, ir.AddressOf):
        e = e.base if type(e) is not ir.AddressOf else e.x
    return e.name if type(e) is ir.Name else None


def _in_order(body: tuple):
    """``(statement, what it reads, the element it writes or None)`` for each statement of
    ``body`` and those nested in it, in program order: an assignment's value and the indices of
    its target are read (its element too, compound), an atomic statement's arguments (its
    value discarded), any other statement's expressions before its bodies."""
    for stmt in body:
        if type(stmt) is ir.AtomicStmt:
            yield stmt, stmt.call.args, None
        elif type(stmt) is ir.Assign:
            target = stmt.target if stmt.op is not None else _indices(stmt.target)
            yield stmt, (stmt.value, target), stmt.target
        else:
            parts, bodies = [], []
            for f in stmt.__dataclass_fields__:
                value = getattr(stmt, f)
                if type(value) is tuple and value and type(value[0]) is ir.Case:
                    bodies += [case.body for case in value]
                elif type(value) is tuple and all(type(x) in _STMTS for x in value):
                    bodies.append(value)
                elif type(value) in _STMTS:
                    bodies.append((value,))
                elif value is not None and not isinstance(value, (str, int, float, Op)):
                    parts.append(value)
            yield stmt, tuple(parts), None
            for b in bodies:
                yield from _in_order(b)


def other_workgroups_writes(kernel: ir.Kernel) -> list[tuple[ir.Stmt, str]]:
    """``(statement, why)`` for each statement of the entry point that reads a read_write
    storage binding it has written, after a storage atomic whose value it used: the "last
    workgroup merges" pattern, which WGSL's memory model does not make portable."""
    storage = {b.name for b in kernel.bindings if b.access == "read_write"}
    written: set[str] = set()
    armed = False
    found: list[tuple[ir.Stmt, str]] = []
    for stmt, reads, target in _in_order(kernel.body):
        used = False
        for n in ir.walk(reads):
            if type(n) is ir.AtomicCall and _root(n.target) in storage:
                used = True
            elif type(n) is ir.Index and armed and _root(n) in written:
                if not found or found[-1][0] is not stmt:
                    found.append((stmt, OTHER_WORKGROUPS_WRITES))
        if _root(target) in storage:
            written.add(_root(target))
        armed |= used
    return found


def bool_workgroup_reads(kernel: ir.Kernel) -> list[tuple[ir.Stmt, str]]:
    """``(statement, why)`` for each statement of the entry point that reads an element of a
    ``bool`` array in workgroup memory (:data:`BOOL_WORKGROUP`)."""
    flags = {v.name for v in kernel.workgroup_vars if array_leaf(v.ty) == bool_}
    found = []
    for stmt, reads, _ in _in_order(kernel.body):
        if flags and any(type(n) is ir.Index and _root(n) in flags for n in ir.walk(reads)):
            found.append((stmt, BOOL_WORKGROUP))
    return found


def _indices(target: Any) -> tuple:
    """The index expressions of an assignment's target (read, unlike its element)."""
    out = []
    while type(target) in (ir.Index, ir.Member):
        if type(target) is ir.Index:
            out.append(target.index)
        target = target.base
    return tuple(out)


def hazards(kernel: ir.Kernel) -> list[tuple[ir.Stmt | None, str]]:
    """``(statement, why)`` for each construct of ``kernel`` (verified on the way) that a WebGPU
    implementation was found to run other than WGSL says, in the order met, then each read of
    other workgroups' writes that WGSL leaves unordered (:func:`other_workgroups_writes`) and
    each read of a bool in workgroup memory (:func:`bool_workgroup_reads`); the statement is
    None for one outside any (a module const)."""
    watch = _Watch(kernel)
    verify(kernel, watch, house=False)
    return watch.found + other_workgroups_writes(kernel) + bool_workgroup_reads(kernel)


#: The loop trips llvmpipe lets one invocation make (Mesa 22.3's ``LP_MAX_TGSI_LOOP_ITERATIONS``).
LLVMPIPE_LOOP_TRIPS = 65535

LLVMPIPE_LOOPS = (
    "llvmpipe (Mesa 22.3, the software Vulkan driver CI runs) ends an invocation's loops after "
    f"{LLVMPIPE_LOOP_TRIPS:,} trips, all the entry point's loops together (a trip that ends "
    "a loop counts too; eight invocations run together count the most of any of them): a "
    "70,000-trip loop stops at 65,535, silently"
)


class _Trips(Verifier):
    """The verifier, working out each ``for`` loop's trip count where WGSL fixes it when the
    shader compiles: ``for (var i = A; i < B; i = i + C)`` (``<=``, ``+=``, ``i++`` too) with
    A, B and C const-expressions, C positive, and ``i`` assigned nowhere else."""

    def __init__(self, kernel: ir.Kernel) -> None:
        super().__init__(kernel)
        self.trips: dict[int, int | None] = {}  # by the loop statement's identity

    def stmt(self, s: ir.Stmt, scope: Scope, ret: Any, loop: bool) -> None:
        if type(s) is ir.For:
            self.trips[id(s)] = self._count(s, scope)
        super().stmt(s, scope, ret, loop)

    def _count(self, s: ir.For, scope: Scope) -> int | None:
        init, cond, update = s.init, s.cond, s.update
        if type(init) is not ir.Var or init.init is None or type(cond) is not ir.Binary:
            return None
        var = ir.Name(init.name)
        if cond.a == var and cond.op in (Op.LT, Op.LE):
            bound, inclusive = cond.b, cond.op is Op.LE
        elif cond.b == var and cond.op in (Op.GT, Op.GE):
            bound, inclusive = cond.a, cond.op is Op.GE
        else:
            return None
        if type(update) is not ir.Assign or update.target != var:
            return None
        step = update.value if update.op is Op.ADD else None
        if update.op is None and type(update.value) is ir.Binary and update.value.op is Op.ADD:
            step = update.value.b if update.value.a == var else None
        a, b = self.const_int(init.init, scope), self.const_int(bound, scope)
        c = None if step is None else self.const_int(step, scope)
        if a is None or b is None or c is None or c <= 0 or b + c >= 2**31:
            return None  # a bound near the type's end could wrap the counter past it
        if any(type(x) is ir.Assign and x.target == var for x in ir.walk(s.body)):
            return None
        return max(0, (b - a + (c if inclusive else c - 1)) // c)


def _walk_trips(body: tuple, trips: dict, functions: dict, depth: int = 0) -> int | None:
    """The most loop trips ``body`` can make, as llvmpipe counts them, or None where a loop's
    count is not fixed: a loop of T trips counts T + 1 (its ending test), and T times its
    body's; both branches of an ``if`` and every clause of a ``switch`` count (an upper bound);
    a helper's loops count at each call."""
    total = 0
    for s in body:
        calls = [x for x in ir.walk(_header(s)) if type(x) is ir.FnCall]
        for call in calls:
            f = functions.get(call.name)
            if f is not None and depth < 32:
                inner = _walk_trips(f.body, trips, functions, depth + 1)
                if inner is None:
                    return None
                total += inner
        if type(s) is ir.For or type(s) is ir.Loop:
            t = trips.get(id(s)) if type(s) is ir.For else None
            inner = _walk_trips(
                s.body + (s.continuing if type(s) is ir.Loop else ()), trips, functions, depth
            )
            if t is None or inner is None:
                return None
            total += t + 1 + t * inner
        else:
            for sub in _bodies(s):
                inner = _walk_trips(sub, trips, functions, depth)
                if inner is None:
                    return None
                total += inner
    return total


def _header(s: ir.Stmt) -> tuple:
    """``s`` without the statements it holds: what it evaluates itself."""
    if type(s) is ir.If:
        return (s.cond,)
    if type(s) is ir.For:
        return (s.init, s.cond, s.update)
    if type(s) is ir.Loop:
        return (s.break_if,)
    if type(s) is ir.Switch:
        return (s.selector,) + tuple(e for c in s.cases for e in c.selectors)
    if type(s) is ir.Block:
        return ()
    return (s,)


def _bodies(s: ir.Stmt) -> tuple[tuple, ...]:
    if type(s) is ir.If:
        return (s.then, s.orelse)
    if type(s) is ir.Block:
        return (s.body,)
    if type(s) is ir.Switch:
        return tuple(c.body for c in s.cases)
    return ()


def llvmpipe_loops(kernel: ir.Kernel) -> tuple[int | None, list[tuple[ir.Stmt, str]]]:
    """The most loop trips one invocation of ``kernel`` can make, as llvmpipe counts them
    (None where a loop's count depends on data, an invocation or an override), and a note
    for each loop llvmpipe may stop early: every loop whose count is not fixed, and where
    every count is fixed but they add up past :data:`LLVMPIPE_LOOP_TRIPS`, the outermost loop
    that takes the sum past it."""
    watch = _Trips(kernel)
    verify(kernel, watch, house=False)
    functions = {f.name: f for f in kernel.functions}
    loops = [
        x
        for x in ir.walk((kernel.body, kernel.functions))
        if type(x) is ir.For or type(x) is ir.Loop
    ]
    unfixed = [s for s in loops if watch.trips.get(id(s)) is None]
    notes = [
        (s, f"a loop whose trip count is not fixed when the shader compiles: {LLVMPIPE_LOOPS}")
        for s in unfixed
    ]
    total = _walk_trips(kernel.body, watch.trips, functions)
    if total is None or total <= LLVMPIPE_LOOP_TRIPS:
        return total, notes
    running = 0
    for s in kernel.body:
        running += _walk_trips((s,), watch.trips, functions) or 0
        if running > LLVMPIPE_LOOP_TRIPS:
            notes.append((s, f"loops of {total:,} trips in all: {LLVMPIPE_LOOPS}"))
            break
    return total, notes
