"""Give WGSL's abstract literals concrete types, and check each statement where it stands.

The IR is typeless except for literals and conversions, so ``x + 1`` must become
``x + Lit(1, type of x)``. This pass walks the raw IR of :mod:`kvdsl.frontend.transform` in
order with a :class:`~kvdsl.ir.verify.Scope`, types names with the verifier's
:class:`~kvdsl.ir.verify.Verifier`, and picks each abstract literal's type from its context like
WGSL does: the other operand, the declared type, the parameter type, the assignment target; with
no context an abstract int is ``i32`` and an abstract float ``f32``. Each finished statement goes
through ``Verifier.stmt``, so a type error is raised with the line of the statement it is in.
"""

from __future__ import annotations


from dataclasses import fields, is_dataclass, replace

from kvdsl.frontend.errors import UnsupportedError, WgslTypeError, discarded
from kvdsl.frontend.numbers import const_int
from kvdsl.frontend.records import (
    ArrayShape,
    CallStmt,
    Phony,
    RawAddress,
    RawCtor,
    RawLet,
    RawLit,
    RawVar,
    StructRef,
    VecShape,
)
from kvdsl.ir import tree as ir
from kvdsl.ir import ops
from kvdsl.ir.ops import Op
from kvdsl.ir.types import (
    Array,
    Mat,
    Ptr,
    Scalar,
    Struct,
    Type,
    Vec,
    array_leaf,
    bool_,
    f16,
    f32,
    i32,
    u32,
)
from kvdsl.frontend.abstract import (
    abstract_float,
    abstract_kind,
    canonical,
    is_abstract,
    pick,
    widest,
)
from kvdsl.frontend.assign import RGBA, RGBA_AS_XYZW, Assignments, hoisted
from kvdsl.frontend.constructors import Constructors
from kvdsl.frontend.texturecalls import FRAGMENT_ONLY, TEXTURE_CALLS, TextureCalls
from kvdsl.ir.scope import Scope, VerifyError, shadowing
from kvdsl.ir.verify import SWITCH_CLAUSE, Verifier

# WGSL builtin functions the IR has no op for: calling one is "outside the subset", not an
# undefined function. (The atomics, subgroup builtins, frexp and modf are read before this.)
WGSL_BUILTINS = set(
    "dpdx dpdxCoarse dpdxFine dpdy dpdyCoarse dpdyFine fwidth fwidthCoarse "
    "fwidthFine quadBroadcast quadSwapDiagonal quadSwapX quadSwapY "
    "textureDimensions textureGather textureLoad textureNumLayers textureNumLevels "
    "textureNumSamples textureSample textureSampleBias textureSampleCompare textureSampleGrad "
    "textureSampleLevel textureSampleBaseClampToEdge textureStore textureBarrier "
    "workgroupBarrier".split()
)


class Typer(Assignments, Constructors, TextureCalls):
    """Turns raw statements into verified IR statements, keeping their source lines."""

    def __init__(
        self,
        checker: Verifier,
        filename: str,
        raw_lines: dict[int, int],
        calls: dict[int, tuple[int, int]] | None = None,
        rounded: list[tuple[int | None, str]] | None = None,
    ) -> None:
        self.checker = checker
        self.rounded = rounded  # (line, literal) of f16 literals not exactly an f16 value
        self.calls = calls or {}
        self.filename = filename
        self.raw_lines = raw_lines
        self.lines: dict[int, int] = {}
        self.line: int | None = None
        self.const_symbols: set[int] = set()  # the scope symbols of function-scope consts
        # Per function-scope const of an abstract value, by its symbol's id: the symbol and the
        # value, which each use reads in its place (abstract, as WGSL evaluates it there).
        self.abstract_consts: dict[int, tuple[object, ir.Expr]] = {}
        # Per module const of an abstract scalar value (no type written), by name:
        # the value, read in its place at each use as a function-scope one is.
        self.module_abstract: dict[str, ir.Expr] = {}
        self.inlining = False  # within an expression whose abstract consts are read in
        self.overrides: frozenset[str] = frozenset()  # the module's overrides (module consts)
        self.structs: dict[str, Struct] = {}  # the module's structs, by name
        self.must_use: frozenset[str] = frozenset()  # the helpers marked @must_use
        self.steps: set[int] = set()  # id(Assign) of each raw `lhs++` and `lhs--`
        self.alias_ctors: dict[int, str] = {}  # id(RawCtor) -> the alias it is called by

    def inline(self, e, scope: Scope):
        """Raw expression ``e`` with each name of a function-scope or module const of an abstract
        value (:attr:`abstract_consts`, :attr:`module_abstract`) replaced by that value:
        ``const h = 0.5; h * 1e-50 * 1e50`` is abstract as a whole, as WGSL evaluates it."""
        if type(e) is ir.Name:
            sym = scope.lookup(e.name)
            if sym is not None and sym.kind == "const" and e.name in self.module_abstract:
                return self.module_abstract[e.name]  # no declaration within shadows it
            held = self.abstract_consts.get(id(sym)) if sym is not None else None
            return held[1] if held is not None and held[0] is sym else e
        if isinstance(e, tuple):
            out = tuple(self.inline(x, scope) for x in e)
            return e if all(a is b for a, b in zip(out, e)) else out
        if not is_dataclass(e):
            return e
        changed = {}
        for f in fields(e):
            v = getattr(e, f.name)
            if is_dataclass(v) or isinstance(v, tuple):
                if (w := self.inline(v, scope)) is not v:
                    changed[f.name] = w
        if not changed:
            return e
        out = replace(e, **changed)
        for held in (self.calls, self.alias_ctors):  # what is kept of the node, by its id
            if id(e) in held:
                held[id(out)] = held[id(e)]
        return out

    def resolve(self, ty):
        """``ty`` with a struct named by the source (a ``StructRef``) resolved to its
        :class:`~kvdsl.ir.types.Struct`, here or as an array's element."""
        if isinstance(ty, StructRef):
            st = self.structs.get(ty.name)
            if st is None:
                raise self.error(f"unknown type '{ty.name}'")
            return st
        if isinstance(ty, Array) and isinstance(array_leaf(ty), StructRef):
            return Array(self.resolve(ty.elem), ty.n)  # array<R, 2>, array<array<R, 2>, 3>
        if isinstance(ty, Ptr) and isinstance(array_leaf(ty.store), StructRef):
            return Ptr(ty.space, self.resolve(ty.store), ty.access)  # ptr<function, S>
        return ty

    def error(self, message: str) -> WgslTypeError:
        return WgslTypeError(message, self.filename, self.line)

    def type_of(self, e: ir.Expr, scope: Scope) -> Type:
        try:
            return self.checker.type_of(e, scope)
        except VerifyError as err:
            raise self.error(str(err)) from None

    # -- expressions --
    def expr(self, e: ir.Expr, scope: Scope, want: Type | None) -> ir.Expr:
        """``e`` with every abstract literal typed; ``want`` is the type the context expects."""
        if (self.abstract_consts or self.module_abstract) and not self.inlining:
            self.inlining = True
            try:
                return self.expr(self.inline(e, scope), scope, want)
            finally:
                self.inlining = False
        match e:
            case RawLit(value, ty):
                ty = ty or pick(value, want)
                try:
                    held = canonical(value, ty)
                except ValueError as err:
                    raise self.error(str(err)) from None
                if ty == f16 and held != value and self.rounded is not None:
                    self.rounded.append((self.line, f"{value!r} (nearest f16 {held!r})"))
                return ir.Lit(held, ty)
            case ir.Lit() | ir.Name():
                return e
            case ir.Unary() | ir.Binary() if (v := abstract_float(e)) is not None:
                return self.expr(RawLit(v, None, v < 0), scope, want)  # in f64, as WGSL
            case ir.Unary(op, x):
                return ir.Unary(op, self.expr(x, scope, bool_ if op == Op.NOT else want))
            case ir.Binary(op, a, b) if op in (Op.SHL, Op.SHR):
                a = self.expr(a, scope, want)
                at = self.type_of(a, scope)
                return ir.Binary(
                    op, a, self.expr(b, scope, Vec(at.n, u32) if isinstance(at, Vec) else u32)
                )
            case ir.Binary(op, a, b) if op in (Op.LAND, Op.LOR):
                return ir.Binary(op, self.expr(a, scope, bool_), self.expr(b, scope, bool_))
            case ir.Binary(op, a, b):
                a, b = self.unify((a, b), scope, None if op in ops.COMPARISONS else want)
                return ir.Binary(op, a, b)
            case ir.Call(op, args) if ops.info(op).spelling in self.checker.function_names:
                # A module function takes the builtin's name: WGSL calls the function.
                node = ir.FnCall(ops.info(op).spelling, args)
                self.calls[id(node)] = self.calls.get(id(e), (self.line, None))
                return self.expr(node, scope, want)
            case ir.Call(op, args) if len(args) != ops.info(op).arity:
                info = ops.info(op)
                raise self.error(f"{info.spelling} takes {info.arity} arguments, got {len(args)}")
            case ir.Call(op, args) if why := shadowing(ops.info(op).spelling, scope, ()):
                raise self.error(why)
            case ir.Call(Op.SELECT, (f, t, c)):
                f, t = self.unify((f, t), scope, want)
                return ir.Call(Op.SELECT, (f, t, self.expr(c, scope, bool_)))
            case ir.Call(Op.SUBGROUP_SHUFFLE_XOR, (x, mask)):
                x = self.expr(x, scope, want)
                return ir.Call(Op.SUBGROUP_SHUFFLE_XOR, (x, self.expr(mask, scope, u32)))
            case ir.Call(Op.SUBGROUP_BROADCAST, args):
                out = ir.Call(
                    Op.SUBGROUP_BROADCAST, self.operands(Op.SUBGROUP_BROADCAST, args, scope, want)
                )
                self.broadcast_lane(out.args[1], scope)
                return out
            case ir.Call(op, args) if ops.info(op).operands is not None:
                return ir.Call(op, self.operands(op, args, scope, want))
            case ir.Call(op, args):
                generic = op != Op.DOT and ops.info(op).generic
                return ir.Call(op, self.unify(args, scope, want if generic else None))
            case ir.FnCall(name, args) if (
                name in TEXTURE_CALLS | FRAGMENT_ONLY
                and args
                and (
                    self.texture(args[:1], 1, scope)
                    or name == "textureGather"  # its channel first
                    and self.texture(args[1:2], 1, scope)
                )
            ):
                return self.texture_call(e, scope)
            case ir.FnCall(name, args):
                fn = self.checker.functions.get(name)
                if fn is None and name in self.structs:
                    return self.struct_ctor(self.structs[name], args, scope)
                if fn is None:
                    if name in WGSL_BUILTINS:
                        line, column = self.calls.get(id(e), (self.line, None))
                        raise UnsupportedError(
                            f"WGSL builtin '{name}'", self.filename, line, column
                        )
                    raise self.error(f"undefined function '{name}'")
                if len(args) != len(fn.params):
                    raise self.error(f"{name} takes {len(fn.params)} arguments, got {len(args)}")
                return ir.FnCall(
                    name, tuple(self.expr(a, scope, t) for a, (_, t) in zip(args, fn.params))
                )
            case RawCtor(ty, args):
                alias = self.alias_ctors.get(id(e))
                if alias is not None and (sym := scope.lookup(alias)) is not None:
                    raise self.error(
                        f"'{alias}' is a {sym.kind} here, not the type: it cannot be called"
                    )
                return self.ctor(ty, args, scope, want)
            case RawAddress(x):
                return ir.AddressOf(self.expr(x, scope, None))
            case ir.Deref(x):
                return ir.Deref(self.expr(x, scope, None))
            case ir.UniformLoad(x):
                return ir.UniformLoad(self.expr(x, scope, None))
            case ir.ArrayLength():
                return e
            case ir.AtomicCall(fn, target, args):
                target = self.expr(target, scope, None)
                try:
                    elem = self.checker.atomic_elem(target, scope, fn)
                except VerifyError as err:
                    raise self.error(str(err)) from None
                return ir.AtomicCall(fn, target, tuple(self.expr(a, scope, elem) for a in args))
            case ir.Bitcast(ty, x):
                return ir.Bitcast(ty, self.expr(x, scope, None))
            case ir.Index(base, i):
                base = self.through(self.expr(base, scope, self.whole(base, want)), scope)
                return ir.Index(base, self.expr(i, scope, None))
            case ir.Member(base, name):
                base = self.through(self.expr(base, scope, self.whole(base, want)), scope)
                if (
                    type(base) is ir.Name
                    and (sym := scope.lookup(base.name))
                    and sym.kind == "binding"
                ):
                    return ir.Member(base, name)  # a binding that is one struct: rows.n
                if isinstance(self.type_of(base, scope), Vec) and set(name) <= RGBA:
                    name = name.translate(RGBA_AS_XYZW)  # WGSL's colour swizzle: the IR's xyzw
                return ir.Member(base, name)
        raise self.error(f"not an expression: {e!r}")

    def whole(self, base: ir.Expr, want: Type | None) -> Type | None:
        """The type an abstract ``vecN(...)`` or ``array(...)`` takes where a component or an
        element of it is wanted as ``want`` (``vec3(1, 2, 3).y + x`` of a u32 ``x``); None
        for any other base."""
        if not isinstance(want, (Scalar, Vec)) or not is_abstract(base):
            return None
        if isinstance(base, RawCtor) and isinstance(base.ty, VecShape):
            return Vec(base.ty.n, want.scalar)
        if isinstance(base, RawCtor) and isinstance(base.ty, ArrayShape):
            return Array(want, len(base.args))
        if isinstance(base, ir.Member):  # vec3(1, 2, 3).zy.x: the swizzle's vector
            return Vec(len(base.name), want.scalar) if len(base.name) > 1 else want.scalar
        return None

    def through(self, base: ir.Expr, scope: Scope) -> ir.Expr:
        """``*base`` where ``base`` names a pointer: WGSL's ``p[i]`` and ``p.x`` reach through
        it (the pointer_composite_access feature), which the IR spells ``(*p)[i]``."""
        if type(base) is ir.Name:
            sym = scope.lookup(base.name)
            if sym is not None and isinstance(sym.ty, Ptr):
                return ir.Deref(base)
        return base

    def unify(
        self, args: tuple[ir.Expr, ...], scope: Scope, want: Type | None
    ) -> tuple[ir.Expr, ...]:
        """Type operands that must agree: abstract ones take the first concrete one's type."""
        out: list[ir.Expr | None] = [None] * len(args)
        like: Type | None = None
        if widest([abstract_kind(a) for a in args]) == "float":
            # Abstract ints and floats alone make an abstract float (2 * 1.5, u32(2 * 1.5)); an
            # abstract int operand is exact before it converts: (16777217 - 16777216) * 1.5.
            if not (isinstance(want, (Scalar, Vec, Mat)) and want.scalar.is_float):
                want = Vec(want.n, f32) if isinstance(want, Vec) else f32
            args = tuple(self.abstract_int(a) for a in args)
        for i, a in enumerate(args):
            if not is_abstract(a):
                out[i] = self.expr(a, scope, like or want)
                like = like or self.type_of(out[i], scope)
        for i, a in enumerate(args):
            if out[i] is None:
                out[i] = self.expr(a, scope, like or want)
        return tuple(out)

    def abstract_int(self, e: ir.Expr) -> ir.Expr:
        """``e``, an abstract int expression of integer arithmetic folded to its literal (WGSL
        evaluates it exactly before converting it to an abstract float); else ``e``."""
        if type(e) is RawLit or abstract_kind(e) != "int":
            return e
        try:
            return RawLit(const_int(e, {}, (self.filename, self.line, None)), None)
        except UnsupportedError:
            return e  # not integer arithmetic of literals (a builtin's call): typed as it is

    def operands(
        self, op: Op, args: tuple[ir.Expr, ...], scope: Scope, want: Type | None
    ) -> tuple[ir.Expr, ...]:
        """The arguments of a builtin whose row says what each is typed from (``operands``)."""
        spec = ops.info(op).operands
        generic = [i for i, k in enumerate(spec) if k == "T"]
        typed = self.unify(
            tuple(args[i] for i in generic), scope, want if ops.info(op).generic else None
        )
        out: list[ir.Expr] = list(args)
        for i, a in zip(generic, typed):
            out[i] = a
        like = self.type_of(typed[0], scope) if typed else None
        for i, k in enumerate(spec):
            if k == "T":
                continue
            if k == "I":
                ctx = Vec(like.n, i32) if isinstance(like, Vec) else i32
            else:
                ctx = k
            out[i] = self.expr(args[i], scope, ctx)
        return tuple(out)

    def const_initialiser(self, name: str, value: ir.Expr, scope: Scope) -> None:
        """A function-scope ``const`` must be a const-expression, as WGSL requires (the IR keeps
        it as a ``let``): literals, module consts, earlier function-scope consts, operators,
        conversions, constructors and builtins of those; no ``let``, ``var``, binding,
        builtin input or helper call (WGSL evaluates a const when it compiles), and no
        ``override`` (its value is the pipeline's)."""
        self.no_override(f"const {name}", "const initializer", value, scope)
        for node in ir.walk(value):
            if type(node) is ir.Name:
                sym = scope.lookup(node.name)
                if sym is not None and sym.kind != "const" and id(sym) not in self.const_symbols:
                    raise self.error(
                        f"const {name}: '{node.name}' is a {sym.kind}, not a const (a const is "
                        "evaluated when the shader compiles: use let)"
                    )
            elif type(node) is ir.FnCall or (
                type(node) is ir.Call and node.op is Op.SUBGROUP_SHUFFLE_XOR
            ):
                called = node.name if type(node) is ir.FnCall else "subgroupShuffleXor"
                raise self.error(
                    f"const {name}: a call of {called} is not a const-expression (use let)"
                )

    def no_override(self, what: str, where: str, value: ir.Expr, scope: Scope) -> None:
        """Refuse, as Tint does, an ``override`` named in ``value``, which ``where`` (a const's
        initialiser, a ``const_assert``) needs to be a const-expression: an override's value is
        the pipeline's, given when it is created, not the shader's when it compiles."""
        for node in ir.walk(value):
            if type(node) is not ir.Name or node.name not in self.overrides:
                continue
            sym = scope.lookup(node.name)
            if sym is not None and sym.kind == "const" and id(sym) not in self.const_symbols:
                raise self.error(
                    f"{what}: {where} requires a const-expression, but expression is an "
                    f"override-expression (it names override '{node.name}')"
                )

    def broadcast_lane(self, lane: ir.Expr, scope: Scope) -> None:
        """``subgroupBroadcast``'s lane must be a const-expression, as Tint requires."""
        for node in ir.walk(lane):
            if type(node) is ir.Name:
                sym = scope.lookup(node.name)
                if sym is not None and sym.kind != "const" and id(sym) not in self.const_symbols:
                    break
            elif type(node) is ir.FnCall or type(node) is ir.Call and node.op in ops.SUBGROUP_OPS:
                break
        else:
            return
        raise self.error(
            "the lane (sourceLaneIndex) argument of subgroupBroadcast must be a const-expression"
        )

    # -- statements --
    def block(self, body: tuple[ir.Stmt, ...], scope: Scope, ret: Type | None, loop: bool) -> tuple:
        out = (self.stmt(s, scope, ret, loop) for s in body)
        return tuple(s for s in out if s is not None)  # a phony of no call is no statement

    def stmt(self, s: ir.Stmt, scope: Scope, ret: Type | None, loop: bool) -> ir.Stmt:
        """The concrete, checked form of raw statement ``s`` (names it declares go in ``scope``)."""
        outer = self.line
        self.line = self.raw_lines.get(id(s), outer)
        out = self._stmt(s, scope, ret, loop)
        if out is not None:
            self.lines[id(out)] = self.line
        self.line = outer
        return out

    def _stmt(self, s: ir.Stmt, scope: Scope, ret: Type | None, loop: bool) -> ir.Stmt:
        match s:
            case RawLet(name, ty, value, const):
                ty = self.resolve(ty)
                value = self.expr(value, scope, ty)
                if ty is not None and self.type_of(value, scope) != ty:
                    got = self.type_of(value, scope)
                    raise self.error(f"let {name}: {ty} is initialised with a {got}")
                if const:
                    self.const_initialiser(name, value, scope)
                out = self.check(ir.Let(name, value), scope, ret, loop)
                if const:
                    sym = scope.lookup(name)
                    self.const_symbols.add(id(sym))
                    if ty is None and is_abstract(raw := self.inline(s.value, scope)):
                        self.abstract_consts[id(sym)] = (sym, raw)
                return out
            case RawVar(name, ty, init):
                ty = self.resolve(ty)
                if init is not None:
                    init = self.expr(init, scope, ty)
                if ty is None:
                    ty = self.type_of(init, scope)
                return self.check(ir.Var(name, ty, init), scope, ret, loop)
            case ir.Assign(ir.Member(base, name), _, _) if self.swizzle_target(base, name, scope):
                return self.swizzle_assign(s, self.lhs_base(base, scope), name, scope, ret, loop)
            case ir.Assign(target, value, op):
                target = self.expr(target, scope, None)
                want = self.type_of(target, scope)
                if op in (Op.SHL, Op.SHR):
                    want = Vec(want.n, u32) if isinstance(want, Vec) else u32
                value = self.expr(value, scope, want)
                if hoisted(target, value, scope):
                    # The reference once, before the value: its indices into lets of their own.
                    out: list[ir.Stmt] = []
                    target = self.hoist_indices(target, self.fresh_names(scope), out, scope)
                    inner = Scope(scope)
                    for stmt in out:
                        self.check(stmt, inner, ret, loop)
                        self.lines[id(stmt)] = self.line
                    last = self.check(ir.Assign(target, value, op), inner, ret, loop)
                    self.lines[id(last)] = self.line
                    return ir.Block((*out, last))
                return self.check(ir.Assign(target, value, op), scope, ret, loop)
            case ir.Return(value) if value is not None:
                return self.check(ir.Return(self.expr(value, scope, ret)), scope, ret, loop)
            case ir.If(cond, then, orelse):
                cond = self.condition(cond, scope)
                then = self.block(then, Scope(scope), ret, loop)
                return ir.If(cond, then, self.block(orelse, Scope(scope), ret, loop))
            case ir.For(init, cond, update, body):
                inner = Scope(scope)
                init = None if init is None else self.stmt(init, inner, ret, loop)
                cond = None if cond is None else self.condition(cond, inner)
                typed_update = None if update is None else self.stmt(update, inner, ret, loop)
                if not isinstance(init, (ir.Var, ir.Let, ir.Assign, type(None))) or not (
                    isinstance(typed_update, (ir.Assign, type(None)))
                ):
                    return self.stmt(self.for_as_blocks(s), scope, ret, loop)
                body = self.block(body, Scope(inner), ret, True)
                return ir.For(init, cond, typed_update, body)
            case ir.Loop(body, continuing, break_if):
                inner = Scope(scope)
                body = self.block(body, inner, ret, True)
                if not continuing and break_if is None:
                    return ir.Loop(body)
                last = Scope(inner)
                continuing = self.block(continuing, last, ret, True)
                if break_if is not None:
                    break_if = self.condition(break_if, last)
                return ir.Loop(body, continuing, break_if)
            case ir.Switch(selector, cases):
                selector = self.expr(selector, scope, None)
                st = self.type_of(selector, scope)
                typed = tuple(
                    ir.Case(
                        tuple(None if e is None else self.expr(e, scope, st) for e in c.selectors),
                        self.block(c.body, Scope(scope), ret, loop or SWITCH_CLAUSE),
                    )
                    for c in cases
                )
                return self.check(ir.Switch(selector, typed), scope, ret, loop)
            case ir.ConstAssert(cond):
                cond = self.expr(cond, scope, bool_)
                self.no_override("const_assert", "const assertion", cond, scope)
                return self.check(ir.ConstAssert(cond), scope, ret, loop)
            case ir.Block(body):
                return ir.Block(self.block(body, Scope(scope), ret, loop))
            case Phony(value):
                return self.phony(value, scope, ret, loop)
            case CallStmt(ir.FnCall("textureStore", args)) if self.texture(args, 3, scope):
                tex = scope.lookup(args[0].name).ty
                coords = self.expr(args[1], scope, None)
                value = self.expr(args[2], scope, tex.texel)
                return self.check(ir.TextureStore(args[0].name, coords, value), scope, ret, loop)
            case CallStmt(ir.FnCall("textureStore", args)) if self.texture(args, 4, scope):
                tex = scope.lookup(args[0].name).ty
                coords, layer = self.expr(args[1], scope, None), self.expr(args[2], scope, None)
                value = self.expr(args[3], scope, getattr(tex, "texel", None))
                store = ir.TextureStore(args[0].name, coords, value, layer)
                return self.check(store, scope, ret, loop)
            case CallStmt(ir.FnCall("textureBarrier", args)) if (
                "textureBarrier" not in self.checker.function_names
            ):
                if args:
                    raise self.error(f"textureBarrier takes no arguments, got {len(args)}")
                return self.check(ir.Barrier("texture"), scope, ret, loop)
            case CallStmt(ir.Call(op) as call, (line, column)) if (
                ops.info(op).spelling not in self.checker.function_names
            ):
                raise discarded(ops.info(op).spelling, self.filename, line, column)
            case CallStmt(call):
                name = ops.info(call.op).spelling if isinstance(call, ir.Call) else call.name
                if name in self.must_use:  # (a helper that takes a builtin's name too)
                    raise self.error(
                        f"the value of {name}(...) is discarded: {name} is @must_use "
                        "(use it, or assign it to _)"
                    )
                typed = self.expr(call, scope, None)
                return self.check(ir.CallStmt(typed), scope, ret, loop)
            case ir.AtomicStmt(call):
                return self.check(ir.AtomicStmt(self.expr(call, scope, None)), scope, ret, loop)
        return self.check(s, scope, ret, loop)

    def condition(self, cond: ir.Expr, scope: Scope) -> ir.Expr:
        cond = self.expr(cond, scope, bool_)
        ct = self.type_of(cond, scope)
        if ct != bool_:
            raise self.error(f"condition is {ct}, expected bool")
        return cond

    def check(self, s: ir.Stmt, scope: Scope, ret: Type | None, loop: bool) -> ir.Stmt:
        try:
            self.checker.stmt(s, scope, ret, loop)
        except VerifyError as err:
            raise self.error(str(err)) from None
        return s
