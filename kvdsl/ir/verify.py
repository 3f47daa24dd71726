"""``verify(kernel)``: reject ill-typed or ill-formed IR before any WGSL exists.

The :class:`Verifier` walks the kernel with a scope of declared names (:mod:`kvdsl.ir.scope`),
types every expression by the op table's typing rules (:mod:`kvdsl.ir.typeof`), evaluates
constants as WGSL does when it compiles (:mod:`kvdsl.ir.consteval`), checks the types memory
holds (:mod:`kvdsl.ir.memtypes`) and how control leaves loops (:mod:`kvdsl.ir.behavior`), and
runs WGSL's uniformity analysis where a barrier or a subgroup builtin stands
(:mod:`kvdsl.ir.uniformity`).
Each error names the offending node (printed compactly by :func:`show`) and says what was
expected.
"""

from __future__ import annotations

from kvdsl.ir import tree as ir
from kvdsl.ir import ops, uniformity
from kvdsl.ir.declarations import (
    MAX_WORKGROUP_BYTES,
    check_private_var,
    module_scope,
    value_struct,
)
from kvdsl.ir.behavior import NEVER_EXITS, continuing_exits, loop_behavior
from kvdsl.ir.memtypes import uniform_type
from kvdsl.ir.ops import Op
from kvdsl.ir.scope import Scope, Symbol, VerifyError, check_name
from kvdsl.ir.show import loop_head, show
from kvdsl.ir.typeof import ExprTyper
from kvdsl.ir.types import (
    POINTER_SPACES,
    Array,
    Ptr,
    RuntimeArray,
    HANDLES,
    StorageTexture,
    Scalar,
    Struct,
    Type,
    Mat,
    Vec,
    bool_,
    i32,
    is_result_struct,
    u32,
)
from kvdsl.ir.types import Atomic, array_leaf, held_as_words, workgroup_words

__all__ = [
    "MAX_INVOCATIONS",
    "MAX_WORKGROUP_BYTES",
    "Verifier",
    "VerifyError",
    "check_barriers",
    "check_private_var",
    "module_scope",
    "value_struct",
    "verify",
]

MAX_INVOCATIONS = 256  # WebGPU's default maxComputeInvocationsPerWorkgroup
_SHL, _SHR, _DIV, _MOD = Op.SHL, Op.SHR, Op.DIV, Op.MOD


class Verifier(ExprTyper):
    """Checks the statements of a kernel against a scope, typing their expressions
    (:class:`~kvdsl.ir.typeof.ExprTyper`)."""

    # -- statements --
    def block(self, body: tuple[ir.Stmt, ...], scope: Scope, ret: Type | None, loop: bool) -> None:
        for s in body:
            self.stmt(s, scope, ret, loop)

    def stmt(self, s: ir.Stmt, scope: Scope, ret: Type | None, loop: bool) -> None:
        match s:
            # Cases by frequency: lets, comments and assignments are most statements.
            case ir.Let(name, value):
                ty = self.type_of(value, scope)
                if not isinstance(ty, (Scalar, Vec, Mat, Array, Ptr)) and not (
                    is_result_struct(ty) or _exchange_result(ty) or value_struct(ty)
                ):
                    raise VerifyError(f"{show(s)}: cannot bind a value of type {ty}")
                pointer = value if isinstance(ty, Ptr) else None  # its root: alias analysis
                scope.declare(name, Symbol(ty, "let", "", pointer), s)
            case ir.Comment(text):
                if "\n" in text:
                    raise VerifyError(f"comment {text!r} spans several lines")
            case ir.Var(name, ty, init):
                if isinstance(ty, Array) and isinstance(ty.elem, Atomic):
                    raise VerifyError(
                        f"{show(s)}: an atomic lives in storage (read_write) or workgroup memory, "
                        "not in a function var"
                    )
                if is_result_struct(ty) and init is None:
                    raise VerifyError(
                        f"{show(s)}: a var of {ty} needs an initialiser (WGSL cannot spell the type)"
                    )
                if not isinstance(ty, (Scalar, Vec, Mat, Array)) and not (
                    value_struct(ty) or is_result_struct(ty)
                ):
                    raise VerifyError(f"{show(s)}: a var cannot have type {ty}")
                if init is not None and (got := self.type_of(init, scope)) is not ty and got != ty:
                    raise VerifyError(f"{show(s)}: initialiser is {got}, expected {ty}")
                scope.declare(name, Symbol(ty, "var"), s)
            case ir.Assign(target, value, op):
                tt = self._target(s, target, scope)
                vt = self.type_of(value, scope)
                if op is not None:
                    if ops.info(op).kind != "binary" or op in ops.NO_COMPOUND:
                        raise VerifyError(f"{show(s)}: {op.name} has no compound assignment")
                    vt = self._apply(value, op, (tt, vt))
                    if op is _SHL or op is _SHR or op is _DIV or op is _MOD:
                        v = self.const_int(value, scope)
                        if v is not None:  # x <<= 40u
                            self._const_operands(ir.Binary(op, target, value), v, scope)
                        elif isinstance(vt, Vec) and vt.elem.is_int:  # w /= vec2<i32>(0i, -1i)
                            self._const_vector_operands(ir.Binary(op, target, value), scope)
                if vt is not tt and vt != tt:
                    raise VerifyError(
                        f"{show(s)}: cannot store {vt} into {show(target)} of type {tt}"
                    )
            case ir.If(cond, then, orelse):
                self._cond(s, cond, scope)
                self.block(then, Scope(scope), ret, loop)
                if orelse != ():  # most ifs have no else: no scope to make for it
                    self.block(orelse, Scope(scope), ret, loop)
            case ir.For(init, cond, update, body):
                if loop_behavior(body, cond is not None) == frozenset():
                    raise VerifyError(f"{loop_head(s)}: {NEVER_EXITS}")
                inner = Scope(scope)
                if init is not None:
                    self.stmt(init, inner, ret, loop)
                if cond is not None:
                    self._cond(s, cond, inner)
                if update is not None:
                    self.stmt(update, inner, ret, loop)
                self.block(body, Scope(inner), ret, True)
            case ir.Loop(body, continuing, break_if):
                if loop_behavior(body + continuing, break_if is not None) == frozenset():
                    raise VerifyError(f"loop {{ ... }}: {NEVER_EXITS}")
                inner = Scope(scope)
                self.block(body, inner, ret, True)
                if continuing or break_if is not None:
                    continuing_exits(continuing)
                    last = Scope(inner)  # the continuing block sees the body's names
                    self.block(continuing, last, ret, True)
                    if break_if is not None:
                        self._cond(s, break_if, last)
            case ir.Switch():
                self._switch(s, scope, ret, loop)
            case ir.ConstAssert(cond):
                self.const_assert(cond, scope)
            case ir.Break() | ir.Continue():
                if not loop or type(s) is ir.Continue and loop == SWITCH_CLAUSE:
                    what = "a loop or switch" if type(s) is ir.Break else "a loop"
                    raise VerifyError(f"{type(s).__name__.lower()} outside {what}")
            case ir.Return(value):
                got = None if value is None else self.type_of(value, scope)
                if got is not ret and got != ret:
                    raise VerifyError(f"return of {got or 'nothing'}, expected {ret or 'nothing'}")
            case ir.Block(body):
                self.block(body, Scope(scope), ret, loop)
            case ir.Barrier():
                self.barriers = True  # where a barrier may stand: check_barriers
            case ir.AtomicStmt(call):
                if type(call) is not ir.AtomicCall:
                    raise VerifyError(f"{show(s)}: not an atomic builtin's call")
                self.atomic_type(call, scope)
            case ir.CallStmt(call):
                if type(call) is not ir.FnCall:
                    raise VerifyError(f"{show(s)}: only a helper's call is a statement")
                self.call_type(call, scope)
            case ir.TextureStore(name, coords, value):
                which = (
                    "textureStore does not take (a storage texture of write or read_write access)"
                )
                tex = self.texel_access(s, name, coords, scope, StorageTexture, which)
                if tex.access == "read":
                    raise VerifyError(f"{show(s)}: '{name}' is a {tex}, which {which}")
                self._layer(s, tex, s.layer, scope)
                vt = self.type_of(value, scope)
                if vt != tex.texel:
                    raise VerifyError(
                        f"{show(s)}: the value is {vt}, expected {tex.texel} ({tex.format})"
                    )
            case _:
                raise VerifyError(f"not a statement: {s!r}")

    def _switch(self, s: ir.Switch, scope: Scope, ret: Type | None, loop: bool | str) -> None:
        """A selector of i32 or u32; clause selectors constants of its type, each value once;
        exactly one ``default``; a ``break`` in a clause leaves the switch."""
        st = self.type_of(s.selector, scope)
        if st is not i32 and st is not u32:
            raise VerifyError(f"switch {show(s.selector)}: the selector is {st}, not i32 or u32")
        seen: set[int] = set()
        defaults = 0
        for case in s.cases:
            if not case.selectors:
                raise VerifyError(f"switch {show(s.selector)}: a clause without a selector")
            for e in case.selectors:
                if e is None:
                    defaults += 1
                    continue
                t = self.type_of(e, scope)
                if t is not st and t != st:
                    raise VerifyError(
                        f"switch {show(s.selector)}: case {show(e)} is {t}, the selector {st}"
                    )
                v = self.const_int(e, scope)
                if v is None:
                    raise VerifyError(
                        f"switch {show(s.selector)}: case {show(e)} is not a const-expression"
                    )
                if v in seen:
                    raise VerifyError(
                        f"switch {show(s.selector)}: case value {show(e)} appears twice"
                    )
                seen.add(v)
            self.block(case.body, Scope(scope), ret, True if loop is True else SWITCH_CLAUSE)
        if defaults != 1:
            raise VerifyError(
                f"switch {show(s.selector)}: {defaults} default clauses (WGSL asks for exactly one)"
            )

    def const_assert(self, cond: ir.Expr, scope: Scope) -> None:
        """``const_assert cond``: a bool const-expression that is true."""
        ct = self.type_of(cond, scope)
        if ct is not bool_ and ct != bool_:
            raise VerifyError(f"const_assert {show(cond)}: the condition is {ct}, not bool")
        v = self.const_bool(cond, scope)
        if v is None:
            raise VerifyError(f"const_assert {show(cond)}: the condition is not a const-expression")
        if not v:
            raise VerifyError(f"const_assert {show(cond)}: the assertion is false")

    def const_bool(self, e: ir.Expr, scope: Scope) -> bool | None:
        """The value of a bool const-expression of integer and float constants, or None."""
        match e:
            case ir.Lit(value) if type(value) is bool:
                return value
            case ir.Unary(Op.NOT, x):
                v = self.const_bool(x, scope)
                return None if v is None else not v
            case ir.Binary(Op.LAND | Op.LOR | Op.AND | Op.OR as op, a, b):
                x, y = self.const_bool(a, scope), self.const_bool(b, scope)
                if x is None or y is None:
                    return None
                return (x and y) if op in (Op.LAND, Op.AND) else (x or y)
            case ir.Binary(op, a, b) if op in ops.COMPARISONS:
                x, y = self.const_int(a, scope), self.const_int(b, scope)
                if x is None or y is None:
                    x, y = self._const_float(a, scope), self._const_float(b, scope)
                if x is None or y is None:
                    return None
                return bool(ops.info(op).impl(x, y))
        return None

    def _cond(self, s: ir.Stmt, cond: ir.Expr, scope: Scope) -> None:
        ct = self.type_of(cond, scope)
        if ct is not bool_ and ct != bool_:
            raise VerifyError(f"{type(s).__name__} condition {show(cond)} is {ct}, expected bool")

    def _memory_type(self, e: ir.Expr, scope: Scope) -> Type:
        """The type of ``e`` where it is memory written through: a binding read whole by no
        one (``state`` of ``state.result = x``, a struct holding an atomic) has its own type."""
        if type(e) is ir.Name:
            sym = scope.lookup(e.name)
            if sym is not None and sym.kind == "binding":
                return sym.ty
        return self.type_of(e, scope)

    def _target(self, s: ir.Stmt, target: ir.Expr, scope: Scope) -> Type:
        root = target
        while isinstance(root, (ir.Index, ir.Member)):
            if (
                type(root) is ir.Member
                and len(root.name) > 1
                and not isinstance(self._memory_type(root.base, scope), Struct)
            ):
                # The IR writes one component at a time (the frontend reads WGSL's v.xy = e
                # as that, as Tint takes it; naga refuses it)
                raise VerifyError(
                    f"{show(s)}: cannot assign to the swizzle {show(root)} (the IR writes one "
                    "component at a time)"
                )
            root = root.base
        if type(root) is ir.Deref:
            pt = self.type_of(root.x, scope)
            if isinstance(pt, Ptr) and pt.access != "read_write":
                where = "storage" if pt.space == "storage" else f"{pt.space} memory"
                raise VerifyError(
                    f"{show(s)}: {show(root.x)} points at read-only {where} ({pt}): only a "
                    "read_write pointer is written through"
                )
            tt = self.type_of(target, scope)
            if isinstance(tt, RuntimeArray):
                raise VerifyError(f"{show(s)}: a runtime-sized array is not assigned whole")
            return tt
        if not isinstance(root, ir.Name):
            raise VerifyError(f"{show(s)}: cannot assign to {show(target)}")
        sym = scope.lookup(root.name)
        if sym is None:
            raise VerifyError(f"{show(s)}: undefined name '{root.name}'")
        whole = sym.kind == "binding" and not isinstance(sym.ty, RuntimeArray)  # n: u32, cfg: S
        whole = whole or sym.kind == "workgroup" and not isinstance(sym.ty, (Array, Atomic))
        if whole or (
            sym.kind in ("binding", "workgroup")
            and (
                isinstance(sym.ty, Struct)
                or isinstance(array_leaf(sym.ty.elem), (Struct, Mat))
                or (sym.kind == "binding" and held_as_words(sym.ty.elem))
                or (sym.kind == "workgroup" and workgroup_words(sym.ty))
            )
        ):
            if sym.kind == "binding" and sym.access != "read_write":
                raise VerifyError(f"{show(s)}: binding '{root.name}' is read-only")
            if isinstance(self.type_of(target, scope), RuntimeArray):
                raise VerifyError(f"{show(s)}: a runtime-sized array is not assigned whole")
            tt = self.type_of(target, scope)
            if isinstance(tt, Struct) and any(isinstance(t, RuntimeArray) for _, t in tt.fields):
                raise VerifyError(
                    f"{show(s)}: {tt} holds a runtime-sized array: it is not assigned whole"
                )
            if sym.kind == "binding":
                self.stored.add(root.name)
        elif sym.kind == "binding":
            if sym.access != "read_write":
                raise VerifyError(f"{show(s)}: binding '{root.name}' is read-only")
            element = target
            if isinstance(sym.ty.elem, Vec) and (
                isinstance(target, ir.Index)
                or isinstance(target, ir.Member)
                and len(target.name) == 1
            ):
                element = target.base if isinstance(target.base, ir.Index) else target
            if not isinstance(element, ir.Index) or (
                element.base is not root and element.base != root
            ):
                raise VerifyError(
                    f"{show(s)}: a binding is written one element (or one component of a "
                    "vector element) at a time"
                )
            self.stored.add(root.name)
        elif sym.kind == "workgroup":
            depth, t = 0, target  # how many indices deep the target is
            while isinstance(t, ir.Index):
                depth, t = depth + 1, t.base
            nested = isinstance(sym.ty.elem, Array)
            leaf = sym.ty.elem.elem if nested else sym.ty.elem
            element = t == root and 1 <= depth <= 1 + nested  # an element, or a row
            lane = t == root and depth == 2 + nested and isinstance(leaf, Vec)
            if not (element or lane):
                raise VerifyError(
                    f"{show(s)}: workgroup var '{root.name}' is written one element at a time "
                    "(or one lane of a vector element, `w[i][lane]`)"
                )
        elif sym.kind != "var" and sym.kind != "private":
            raise VerifyError(f"{show(s)}: '{root.name}' is a {sym.kind}, not a var")
        return self.type_of(target, scope)


SWITCH_CLAUSE = (
    "switch"  # the ``loop`` flag in a switch clause outside any loop: break, not continue
)


def check_barriers(kernel: ir.Kernel) -> None:
    """A ``workgroupBarrier()`` must be reached by every invocation of a workgroup or none, and a
    ``subgroupShuffleXor()`` by every invocation of a subgroup with the same mask: WGSL's
    uniformity analysis (:mod:`kvdsl.ir.uniformity`), helper functions included (a helper
    holding one is called only where control flow, and the arguments its barrier depends on,
    are uniform)."""
    try:
        uniformity.check(kernel)
    except uniformity.UniformityError as err:
        raise VerifyError(str(err), node=err.node) from None


def verify(kernel: ir.Kernel, verifier: Verifier | None = None, *, house: bool = True) -> ir.Kernel:
    """Check ``kernel``; return it unchanged or raise :class:`VerifyError` naming the problem.
    ``verifier``: a :class:`Verifier` of ``kernel`` to check with (a subclass that watches what
    it types, :mod:`kvdsl.ir.portability`'s); a fresh one by default. ``house``: hold the kernel
    to kvdsl's own rules for its catalog too (:func:`house_notes`), as errors; WGSL from
    elsewhere (the frontend's) passes False, and ``kvdsl check`` prints them as notes."""
    verifier = Verifier(kernel) if verifier is None else verifier
    scope = module_scope(kernel, verifier)
    wg = kernel.workgroup_size
    if len(wg) != 3 or any(not isinstance(n, int) or n < 1 for n in wg):
        raise VerifyError(f"workgroup size {wg} must be three positive integers")
    if wg[0] * wg[1] * wg[2] > MAX_INVOCATIONS:
        raise VerifyError(
            f"workgroup size {wg} has {wg[0] * wg[1] * wg[2]} invocations, at most {MAX_INVOCATIONS}"
        )
    if kernel.workgroup_size_name is not None:
        c = kernel.const(kernel.workgroup_size_name)
        if c is None or c.value != ir.Lit(wg[0], u32):
            raise VerifyError(
                f"workgroup size const '{kernel.workgroup_size_name}' must be declared as {wg[0]}u"
            )
    for fn in kernel.functions:
        check_name(fn.name, fn)
        if fn.name == "main" or scope.lookup(fn.name) is not None or fn.name in verifier.functions:
            raise VerifyError(f"function {fn.name}: the name is taken at module scope")
        inner = Scope(scope)
        for pname, pty in fn.params:
            if isinstance(pty, Ptr):
                check_pointer_type(f"function {fn.name}: parameter {pname}", pty)
            kind = "texture" if isinstance(pty, HANDLES) else "param"
            inner.declare(pname, Symbol(pty, kind), fn)
        if isinstance(fn.ret, Ptr):
            raise VerifyError(f"function {fn.name} returns a pointer (WGSL refuses it)")
        verifier.block(fn.body, inner, fn.ret, False)
        if fn.ret is not None and not (fn.body and isinstance(fn.body[-1], ir.Return)):
            raise VerifyError(f"function {fn.name} must end with a return")
        verifier.functions[fn.name] = fn
    main = Scope(scope)
    for pname, builtin in kernel.builtins:
        if builtin not in ir.BUILTIN_INPUTS:
            raise VerifyError(
                f"unknown compute builtin '{builtin}' ({', '.join(ir.BUILTIN_INPUTS)})"
            )
        ty = ir.builtin_type(builtin)
        main.declare(pname, Symbol(ty, "builtin"), kernel)
    verifier.block(kernel.body, main, None, False)
    if verifier.barriers:  # a barrier or a shuffle, in the entry point or a helper
        check_barriers(kernel)
    if house:
        for why in house_notes(kernel, verifier):
            raise VerifyError(why)
    if kernel.dispatch is not None:
        d = kernel.dispatch
        if verifier.type_of(d.items, scope) != u32:
            raise VerifyError(f"dispatch items {show(d.items)} must be u32")
        if d.per_group < 1 or not 1 <= d.fold <= 65535:
            raise VerifyError(f"dispatch per_group {d.per_group} / fold {d.fold} out of range")
    return kernel


def _holds_bool(ty: object) -> bool:
    """Whether ``ty`` is or holds a bool (a struct's member, an array's element, nested)."""
    if isinstance(ty, (Array, RuntimeArray)):
        return _holds_bool(ty.elem)
    if isinstance(ty, Struct):
        return any(_holds_bool(t) for _, t in ty.fields)
    return isinstance(ty, (Scalar, Vec)) and (ty if isinstance(ty, Scalar) else ty.elem) == bool_


def check_pointer_type(what: str, t: Ptr) -> None:
    """A pointer type WGSL has: one of its address spaces, ``read`` or ``read_write`` access
    (only ``storage`` may be ``read``), to a type that memory of that space holds."""
    if t.space not in POINTER_SPACES:
        raise VerifyError(
            f"{what}: address space '{t.space}' (a pointer names one of "
            f"{', '.join(POINTER_SPACES)})"
        )
    allowed = {"storage": ("read", "read_write"), "uniform": ("read",)}
    if t.access not in allowed.get(t.space, ("read_write",)):
        raise VerifyError(
            f"{what}: access '{t.access}' in {t.space} memory (read_write; storage also read; "
            "uniform read only)"
        )
    kinds = (Scalar, Vec, Mat, Array, RuntimeArray, Atomic, Struct)
    if not isinstance(t.store, kinds) or (
        isinstance(t.store, RuntimeArray) and t.space != "storage"
    ):
        raise VerifyError(f"{what}: {t.space} memory does not hold a {t.store}")
    if t.space == "uniform" and not uniform_type(t.store):
        raise VerifyError(f"{what}: uniform memory does not hold a {t.store}")
    if t.space == "storage" and _holds_bool(t.store):
        raise VerifyError(f"{what}: storage memory does not hold a {t.store} (it holds a bool)")
    if isinstance(t.store, Atomic) and (
        t.space not in ("storage", "workgroup") or t.access != "read_write"
    ):
        raise VerifyError(
            f"{what}: an atomic lives in read_write storage or workgroup memory, not in "
            f"{t.access} {t.space} memory"
        )
    if t.space in ("storage", "workgroup") and t.store == bool_:
        raise VerifyError(f"{what}: {t.space} memory does not hold a bool")


def house_notes(kernel: ir.Kernel, verifier: Verifier | None = None) -> list[str]:
    """kvdsl's rules for its own kernels that WGSL does not have: every binding is used, and
    every ``read_write`` one is written. ``verifier``: one that has verified ``kernel``
    (a fresh one verifies it first, without these rules)."""
    if verifier is None:
        verifier = Verifier(kernel)
        verify(kernel, verifier, house=False)
    notes = []
    for b in kernel.bindings:
        if b.name not in verifier.used:
            notes.append(f"binding '{b.name}' is declared but never used")
        elif b.access == "read_write" and b.name not in verifier.stored:
            notes.append(f"binding '{b.name}' is read_write but never written")
    return notes


def _exchange_result(ty: Type) -> bool:
    """Whether ``ty`` is the struct atomicCompareExchangeWeak returns (a ``let`` may hold it)."""
    return isinstance(ty, Struct) and ty.name.startswith("__atomic_compare_exchange_result_")
