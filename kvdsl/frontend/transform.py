"""Parse tree → IR: a lark :class:`~lark.Transformer` whose rules map 1:1 to IR constructors.

The result is *raw* IR: WGSL's abstract literals (``3``, ``0.5``) stay :class:`RawLit` and a
one-argument ``T(x)`` stays :class:`RawCtor` (a conversion or a constructor, depending on the
type of ``x``) until :mod:`kvdsl.frontend.typer` has a scope to type them in. Module-scope
declarations come out as the records of :mod:`kvdsl.frontend.records` (imported from here by
the parser and the typer), assembled into a kernel by :mod:`kvdsl.frontend.parser`. Every statement's source line is kept in ``lines`` (by ``id``).
"""

from __future__ import annotations

from typing import Any

from lark import Token, Transformer, v_args
from lark.tree import Meta

from kvdsl.frontend.comments import LineComment
from kvdsl.frontend.errors import UnsupportedError, WgslSyntaxError, WgslTypeError
from kvdsl.ir import tree as ir
from kvdsl.ir import ops
from kvdsl.ir.ops import Op
from kvdsl.ir.types import (
    POINTER_SPACES,
    SCALARS,
    Array,
    Mat,
    Ptr,
    RuntimeArray,
    Scalar,
    Vec,
    bool_,
    f16,
    f32,
    i32,
    u32,
)
from kvdsl.ir.types import Atomic

from kvdsl.frontend.records import (  # noqa: F401 (the parser and typer import them here)
    RawLit,
    RawCtor,
    MatShape,
    RawAddress,
    RawLet,
    RawVar,
    CallStmt,
    StructRef,
    Attr,
    StructDecl,
    GlobalVar,
    ConstDecl,
    FnDecl,
    Directive,
    ModuleAssert,
    Module,
)

VEC_ALIASES = {
    f"vec{n}{s}": Vec(n, ty)
    for n in (2, 3, 4)
    for s, ty in (("f", f32), ("h", f16), ("i", i32), ("u", u32))
}
MAT_ALIASES = {
    f"mat{c}x{r}{s}": Mat(c, r, ty)
    for c in (2, 3, 4)
    for r in (2, 3, 4)
    for s, ty in (("f", f32), ("h", f16))
}
# Predeclared WGSL types with no place in the IR.
UNSUPPORTED_TYPES = {"sampler", "sampler_comparison", "texture_external"}
UNSUPPORTED_TYPE_PREFIXES = ("texture_",)

_DEFAULT = object()  # the ``default`` selector of a switch clause, until it becomes None
_UNARY = {"neg": Op.NEG, "logic_not": Op.NOT, "bit_not": Op.BITNOT}


def _binary(op: Op):
    def build(self, a: ir.Expr, b: ir.Expr) -> ir.Binary:
        return ir.Binary(op, a, b)

    build.__doc__ = f"``a {ops.info(op).spelling} b``"
    return build


def parse_number(tok: Token, filename: str) -> RawLit:
    """A NUMBER token as a literal, rejecting what WGSL rejects (leading zeros, overflow)."""
    text = str(tok)
    ty: Scalar | None = None
    if text[:2] in ("0x", "0X"):
        if text[-1] in "iu":
            ty, text = (i32 if text[-1] == "i" else u32), text[:-1]
        value: int | float = int(text, 16)
        if value >= 2**64:  # past any WGSL integer; its decimal digits would be past Python's
            _bad(
                tok,
                filename,
                f"value cannot be represented as '{ty or 'abstract-int'}': a hexadecimal literal "
                "past 64 bits fits no WGSL type",
            )
    elif any(c in text for c in ".eE") or text[-1] in "fh":
        if text[-1] in "fh":
            ty, text = (f32 if text[-1] == "f" else f16), text[:-1]
        if "." not in text and "e" not in text.lower() and len(text) > 1 and text[0] == "0":
            _bad(tok, filename, "leading zeros are not allowed in a WGSL literal")
        value = float(text)
    else:
        if text[-1] in "iu":
            ty, text = (i32 if text[-1] == "i" else u32), text[:-1]
        if len(text) > 1 and text[0] == "0":
            _bad(tok, filename, "leading zeros are not allowed in a WGSL literal")
        if len(text) > 20:  # past any WGSL integer (abstract-int holds 64 bits), as Tint words it
            _bad(
                tok,
                filename,
                f"value cannot be represented as '{ty or 'abstract-int'}': an integer literal of "
                f"{len(text):,} digits fits no WGSL type",
            )
        value = int(text)
    if ty == i32 and value >= 2**31 or ty == u32 and value >= 2**32:
        _bad(tok, filename, f"literal {tok} does not fit {ty}")
    return RawLit(value, ty)


def _bad(tok: Token, filename: str, message: str) -> None:
    raise WgslSyntaxError(message, filename, tok.line, tok.column, str(tok), ())


def const_int(e: ir.Expr, consts: dict[str, int | float], where: tuple[str, int, int]) -> int:
    """Evaluate an integer const-expression (literals, module consts, integer arithmetic)."""
    match e:
        case RawLit(value, _) | ir.Lit(value, _) if isinstance(value, int):
            return value
        case ir.Name(name) if isinstance(consts.get(name), int):
            return consts[name]
        case ir.Unary(Op.NEG, x):
            return -const_int(x, consts, where)
        case ir.Binary(op, a, b) if op in _CONST_OPS:
            x, y = const_int(a, consts, where), const_int(b, consts, where)
            if op in (Op.DIV, Op.MOD) and y == 0:
                raise UnsupportedError("division by zero in a const expression", *where)
            return _CONST_OPS[op](x, y)
    raise UnsupportedError(
        "expected an integer made of literals and module consts declared above", *where
    )


_CONST_OPS = {
    Op.ADD: lambda x, y: x + y,
    Op.SUB: lambda x, y: x - y,
    Op.MUL: lambda x, y: x * y,
    Op.DIV: lambda x, y: abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1),
    Op.MOD: lambda x, y: (abs(x) % abs(y)) * (1 if x >= 0 else -1),
    Op.SHL: lambda x, y: x << (y & 31),
    Op.SHR: lambda x, y: x >> (y & 31),
    Op.AND: lambda x, y: x & y,
    Op.OR: lambda x, y: x | y,
    Op.XOR: lambda x, y: x ^ y,
}


@v_args(inline=True)
class ToIR(Transformer):
    """Rules → IR constructors. Unknown rules raise (lark would silently pass them through)."""

    def __init__(
        self,
        filename: str,
        comments: list[LineComment],
        constants: dict[str, int | float | bool | str] | None = None,
    ) -> None:
        super().__init__()
        self.filename = filename
        # Override values by name or @id, and the keys used of them.
        self.constants = {str(k): v for k, v in (constants or {}).items()}
        self.overridden: set[str] = set()
        self.overridden_names: set[str] = set()
        self.lines: dict[int, int] = {}
        self.comments = [c for c in comments if c.own_line]
        self.claimed: set[int] = set()  # lines of comments placed into a block
        self.consts: dict[str, int | float] = {}  # integer values, for array sizes
        self.calls: dict[int, tuple[int, int]] = {}  # id(FnCall) -> position of its name
        # Type aliases, resolved where they are named (declared above their use, as consts).
        self.aliases: dict[str, Any] = {}

    def __default__(self, data, children, meta):
        raise NotImplementedError(f"grammar rule '{data}' has no IR constructor")

    def _err(self, message: str, line: int, column: int | None = None):
        return UnsupportedError(message, self.filename, line, column)

    def _at(self, node: ir.Stmt, meta: Meta) -> ir.Stmt:
        self.lines[id(node)] = meta.line
        return node

    # -- module --
    def start(self, *items) -> Module:
        enables = tuple(e for i in items if isinstance(i, tuple) for e in i)
        directives = tuple(i for i in items if isinstance(i, Directive))
        decls = tuple(i for i in items if i is not None and not isinstance(i, (tuple, Directive)))
        return Module(enables, decls, directives)

    def requires(self, *names: Token) -> Directive:
        words = tuple(str(n) for n in names)
        return Directive(f"requires {', '.join(words)}", words, names[0].line, names[0].column)

    def diagnostic(self, severity: Token, rule: str) -> Directive:
        text = f"diagnostic({severity}, {rule})"
        return Directive(text, (str(severity), rule), severity.line, severity.column)

    def diagnostic_rule(self, *names: Token) -> str:
        return ".".join(map(str, names))

    @v_args(meta=True, inline=True)
    def module_assert(self, meta: Meta, cond: ir.Expr) -> ModuleAssert:
        return ModuleAssert(cond, meta.line)

    def alias(self, name: Token, ty) -> None:
        if str(name) in self.aliases or str(name) in SCALARS or str(name) in VEC_ALIASES:
            raise self._err(f"alias {name}: the name is taken", name.line, name.column)
        self.aliases[str(name)] = ty
        return None

    def enable(self, *names: Token) -> tuple[tuple[str, int, int], ...]:
        return tuple((str(n), n.line, n.column) for n in names)

    def empty(self) -> None:
        return None

    @v_args(meta=True, inline=True)
    def struct_decl(self, meta: Meta, name: Token, *fields) -> StructDecl:
        return StructDecl(str(name), fields, meta.line)

    def field(self, attrs: tuple[Attr, ...], name: Token, ty) -> tuple[str, Any]:
        if attrs:
            raise self._err(f"attribute @{attrs[0].name} on a struct member", attrs[0].line)
        return str(name), ty

    def global_var(self, attrs, address, name: Token, ty, init) -> GlobalVar:
        space, access = address if address is not None else (None, None)
        return GlobalVar(
            attrs, space, access, str(name), ty, init is not None, name.line, name.column
        )

    def address(self, space: Token, access: Token | None) -> tuple[str, str | None]:
        return str(space), None if access is None else str(access)

    @v_args(meta=True, inline=True)
    def const_decl(self, meta: Meta, name: Token, ty, value: ir.Expr) -> ConstDecl:
        return self._const(name, ty, value, meta.line)

    def _const(self, name: Token, ty, value: ir.Expr, line: int) -> ConstDecl:
        if value is not None and isinstance(value, (RawLit, ir.Lit, ir.Name, ir.Unary, ir.Binary)):
            try:
                self.consts[str(name)] = const_int(value, self.consts, ("", 0, 0))
            except UnsupportedError:
                pass
        return ConstDecl(str(name), ty, value, line)

    @v_args(meta=True, inline=True)
    def override_decl(self, meta: Meta, attrs, name: Token, ty, value) -> ConstDecl:
        """An ``override``, specialised as a pipeline is: the module ``const`` of the value
        given (by name or ``@id``), else of its initialiser."""
        key = None
        self.overridden_names.add(str(name))
        for a in attrs:
            if a.name != "id" or a.args is None or len(a.args) != 1:
                raise self._err(f"attribute @{a.name} on override {name}", a.line, a.column)
            key = str(const_int(a.args[0], self.consts, (self.filename, a.line, a.column)))
        given = [k for k in (str(name), key) if k is not None and k in self.constants]
        if len(given) == 2:  # a pipeline's constants name each override once
            raise WgslTypeError(
                f"constants: override {name} is given twice, by name ({name}="
                f"{self.constants[given[0]]}) and by its @id ({key}={self.constants[key]}): "
                "give it one value",
                self.filename,
                name.line,
                name.column,
            )
        if given:
            self.overridden.update(given)
            value = self._override_value(name, ty, value, self.constants[given[0]])
        elif value is None:
            raise WgslTypeError(
                f"override {name} has no initialiser and no value was given for it (give one: "
                f"--constants {name}=VALUE, or constants={{'{name}': VALUE}})",
                self.filename,
                name.line,
                name.column,
            )
        return self._const(name, ty, value, meta.line)

    def _override_value(self, name: Token, ty, default, given) -> ir.Expr:
        """The literal of ``given`` (a number, a bool or its text) in the override's type: its
        declared one, else its initialiser literal's."""
        if ty is None and isinstance(default, RawLit):
            ty = default.ty
        if ty is None and isinstance(default, ir.Lit):
            ty = default.ty
        text = str(given).strip().lower()
        try:
            if ty == bool_ or isinstance(given, bool) or text in ("true", "false"):
                if text not in ("true", "false"):
                    raise ValueError
                return ir.Lit(text == "true", bool_)
            if ty is not None and ty.is_int or ty is None and isinstance(given, int):
                v: int | float = int(text, 0)
            else:
                v = float(text)
            if v < 0 and ty == u32:
                raise ValueError
            return RawLit(v, ty, v < 0)
        except ValueError:
            raise WgslTypeError(
                f"override {name}: the value {given!r} is not a {ty or 'number'}",
                self.filename,
                name.line,
                name.column,
            ) from None

    @v_args(meta=True, inline=True)
    def fn_decl(self, meta: Meta, attrs, name: Token, params, ret, body) -> FnDecl:
        return FnDecl(attrs, str(name), params, ret, body, meta.line)

    def params(self, *params) -> tuple:
        return params

    def param(self, attrs, name: Token, ty) -> tuple:
        return attrs, str(name), ty

    def attrs(self, *attrs: Attr) -> tuple[Attr, ...]:
        return attrs

    def attribute(self, name: Token, args) -> Attr:
        return Attr(str(name), args, name.line, name.column)

    # -- statements --
    @v_args(meta=True, inline=True)
    def block(self, meta: Meta, *stmts: ir.Stmt) -> tuple[ir.Stmt, ...]:
        return self._commented(meta, stmts)

    @v_args(meta=True, inline=True)
    def loop_body(self, meta: Meta, *parts) -> tuple:
        *stmts, continuing = parts
        return self._commented(meta, tuple(stmts)), continuing

    @v_args(meta=True, inline=True)
    def continuing(self, meta: Meta, *parts) -> tuple:
        *stmts, break_if = parts
        return self._commented(meta, tuple(stmts)), break_if

    def break_if(self, cond: ir.Expr) -> ir.Expr:
        return cond

    @v_args(meta=True, inline=True)
    def switch(self, meta: Meta, selector: ir.Expr, *cases: ir.Case) -> ir.Switch:
        return self._at(ir.Switch(selector, cases), meta)

    def case_clause(self, *parts) -> ir.Case:
        *selectors, body = parts
        return ir.Case(tuple(None if s is _DEFAULT else s for s in selectors), body)

    def default_clause(self, body: tuple) -> ir.Case:
        return ir.Case((None,), body)

    def default_selector(self) -> object:
        return _DEFAULT

    @v_args(meta=True, inline=True)
    def const_assert(self, meta: Meta, cond: ir.Expr) -> ir.ConstAssert:
        return self._at(ir.ConstAssert(cond), meta)

    def _commented(self, meta: Meta, stmts: tuple) -> tuple[ir.Stmt, ...]:
        """``stmts`` with the own-line comments of the braces' lines placed among them."""
        # Children are transformed first, so inner blocks have claimed their comments already.
        stmts = tuple(s for s in stmts if s is not None)
        mine = [
            c
            for c in self.comments
            if meta.line < c.line < meta.end_line and c.line not in self.claimed
        ]
        if not mine:
            return stmts
        out: list[ir.Stmt] = []
        pending = sorted(mine, key=lambda c: c.line)
        for s in stmts:
            while pending and pending[0].line < self.lines[id(s)]:
                out.append(self._comment(pending.pop(0)))
            out.append(s)
        out += [self._comment(c) for c in pending]
        return tuple(out)

    def _comment(self, c: LineComment) -> ir.Comment:
        self.claimed.add(c.line)
        node = ir.Comment(c.text)
        self.lines[id(node)] = c.line
        return node

    @v_args(meta=True, inline=True)
    def if_(self, meta: Meta, cond: ir.Expr, then: tuple, orelse) -> ir.If:
        if orelse is None:
            orelse = ()
        elif isinstance(orelse, ir.If):
            orelse = (orelse,)
        return self._at(ir.If(cond, then, orelse), meta)

    @v_args(meta=True, inline=True)
    def for_(self, meta: Meta, init, cond, update, body) -> ir.For:
        if init is not None and not isinstance(init, (RawLet, RawVar, ir.Assign)):
            raise self._err("a for initialiser other than let, var or an assignment", meta.line)
        if update is not None and not isinstance(update, ir.Assign):
            raise self._err("a for update other than an assignment", meta.line)
        return self._at(ir.For(init, cond, update, body), meta)

    @v_args(meta=True, inline=True)
    def while_(self, meta: Meta, cond, body) -> ir.For:
        # WGSL defines `while cond { body }` as `for (; cond; ) { body }`: the IR's For, which
        # the emitter prints in that form.
        return self._at(ir.For(None, cond, None, body), meta)

    @v_args(meta=True, inline=True)
    def loop(self, meta: Meta, parts) -> ir.Loop:
        body, continuing = parts
        if continuing is None:
            return self._at(ir.Loop(body), meta)
        return self._at(ir.Loop(body, *continuing), meta)

    @v_args(meta=True, inline=True)
    def block_stmt(self, meta: Meta, body) -> ir.Block:
        return self._at(ir.Block(body), meta)

    @v_args(meta=True, inline=True)
    def let(self, meta: Meta, name: Token, ty, value) -> RawLet:
        return self._at(RawLet(str(name), ty, value), meta)

    @v_args(meta=True, inline=True)
    def local_const(self, meta: Meta, name: Token, ty, value) -> RawLet:
        return self._at(RawLet(str(name), ty, value, const=True), meta)

    @v_args(meta=True, inline=True)
    def local_var(self, meta: Meta, address, name: Token, ty, init) -> RawVar:
        if address is not None and address != ("function", None):
            raise self._err(
                f"var<{address[0]}> inside a function (only var and var<function>)",
                name.line,
                name.column,
            )
        if ty is None and init is None:
            raise self._err(f"var {name} needs a type or an initialiser", name.line, name.column)
        return self._at(RawVar(str(name), ty, init), meta)

    @v_args(meta=True, inline=True)
    def assign(self, meta: Meta, target: ir.Expr, value: ir.Expr) -> ir.Assign:
        return self._at(ir.Assign(self._lhs(target, meta), value), meta)

    @v_args(meta=True, inline=True)
    def compound_assign(self, meta: Meta, target: ir.Expr, op: Token, value: ir.Expr) -> ir.Assign:
        binop = ops.BY_SPELLING[(False, 2, str(op)[:-1])]
        return self._at(ir.Assign(self._lhs(target, meta), value, binop), meta)

    @v_args(meta=True, inline=True)
    def increment(self, meta: Meta, target: ir.Expr) -> ir.Assign:
        return self._at(ir.Assign(self._lhs(target, meta), RawLit(1, None), Op.ADD), meta)

    @v_args(meta=True, inline=True)
    def decrement(self, meta: Meta, target: ir.Expr) -> ir.Assign:
        return self._at(ir.Assign(self._lhs(target, meta), RawLit(1, None), Op.SUB), meta)

    def _lhs(self, target: ir.Expr, meta: Meta) -> ir.Expr:
        root = target
        while isinstance(root, (ir.Index, ir.Member)):
            root = root.base
        if root == ir.Name("_"):
            raise self._err("phony assignment '_ = ...'", meta.line, meta.column)
        if not isinstance(root, (ir.Name, ir.Deref)):
            raise self._err("assignment to something other than a variable", meta.line)
        return target

    @v_args(meta=True, inline=True)
    def return_(self, meta: Meta, value) -> ir.Return:
        return self._at(ir.Return(value), meta)

    @v_args(meta=True, inline=True)
    def break_(self, meta: Meta) -> ir.Break:
        return self._at(ir.Break(), meta)

    @v_args(meta=True, inline=True)
    def continue_(self, meta: Meta) -> ir.Continue:
        return self._at(ir.Continue(), meta)

    @v_args(meta=True, inline=True)
    def barrier(self, meta: Meta) -> ir.Barrier:
        return self._at(ir.Barrier(), meta)

    @v_args(meta=True, inline=True)
    def storage_barrier(self, meta: Meta) -> ir.Barrier:
        return self._at(ir.Barrier("storage"), meta)

    @v_args(meta=True, inline=True)
    def call_stmt(self, meta: Meta, e: ir.Expr) -> CallStmt:
        if isinstance(e, ir.AtomicCall):  # none is @must_use
            return self._at(ir.AtomicStmt(e), meta)
        if not isinstance(e, (ir.FnCall, ir.Call, RawCtor)):
            raise WgslSyntaxError(
                "an expression is not a statement (only a call is)",
                self.filename,
                meta.line,
                meta.column,
                "",
                (),
            )
        if isinstance(e, ir.FnCall):
            return self._at(CallStmt(e), meta)
        what = ops.info(e.op).spelling if isinstance(e, ir.Call) else "a conversion"
        # WGSL's builtins that return a value are @must_use: a statement may not discard it.
        raise WgslSyntaxError(
            f"the value of {what}(...) is discarded: WGSL refuses a call statement of a "
            "builtin that returns a value (@must_use)",
            self.filename,
            meta.line,
            meta.column,
            "",
            (),
        )

    # -- expressions --
    def name(self, tok: Token) -> ir.Name:
        return ir.Name(str(tok))

    def number(self, tok: Token) -> RawLit:
        return parse_number(tok, self.filename)

    def true(self) -> ir.Lit:
        return ir.Lit(True, bool_)

    def false(self) -> ir.Lit:
        return ir.Lit(False, bool_)

    def args(self, *args: ir.Expr) -> tuple[ir.Expr, ...]:
        return args

    def call(self, fn: Token, args: tuple[ir.Expr, ...]) -> ir.Expr:
        name = str(fn)
        if name in self.aliases and isinstance(self.aliases[name], (Scalar, Vec, Mat, Array)):
            return RawCtor(self.aliases[name], args)
        if name in SCALARS:
            return RawCtor(SCALARS[name], args)
        if name in VEC_ALIASES:
            return RawCtor(VEC_ALIASES[name], args)
        if name in MAT_ALIASES:
            return RawCtor(MAT_ALIASES[name], args)
        if (
            name == "arrayLength"
            and len(args) == 1
            and isinstance(args[0], RawAddress)
            and isinstance(args[0].x, ir.Member)
            and isinstance(args[0].x.base, ir.Name)
        ):
            return ir.ArrayLength(args[0].x.base.name, args[0].x.name)  # &rows.data
        if name == "arrayLength":
            if len(args) != 1 or not (
                isinstance(args[0], RawAddress) and isinstance(args[0].x, ir.Name)
            ):
                raise self._err("arrayLength of something other than &binding", fn.line, fn.column)
            return ir.ArrayLength(args[0].x.name)
        if name == "workgroupUniformLoad":
            if len(args) != 1:
                raise self._err(
                    f"workgroupUniformLoad takes 1 argument (a pointer into workgroup memory), "
                    f"got {len(args)}",
                    fn.line,
                    fn.column,
                )
            return ir.UniformLoad(args[0])
        if name.startswith("atomic") and name[6:] in ir.ATOMIC_FUNCTIONS:
            return self.atomic_call(fn, name[6:], args)
        op = ops.builtin_named(name)
        if op is not None:  # the typer checks its arity, where no module function takes the name
            node = ir.Call(op, args)
            self.calls[id(node)] = (fn.line, fn.column)
            return node
        node = ir.FnCall(name, args)
        self.calls[id(node)] = (fn.line, fn.column)
        return node

    def atomic_call(self, tok: Token, fn: str, args: tuple[ir.Expr, ...]) -> ir.AtomicCall:
        """``atomicFn(&target, args...)``: the pointer's ``&`` taken off (the typer checks
        that ``target`` is an atomic element); ``atomicFn(p, args...)`` with a pointer value
        ``p`` targets ``*p``."""
        want = ir.ATOMIC_FUNCTIONS[fn] + 1
        if len(args) != want:
            raise WgslTypeError(
                f"atomic{fn} takes {want} argument{'s' * (want > 1)} (a pointer to an atomic"
                f"{' and ' + str(want - 1) + ' value' + 's' * (want > 2) if want > 1 else ''}),"
                f" got {len(args)}",
                self.filename,
                tok.line,
            )
        if not isinstance(args[0], RawAddress):  # a pointer value: a let or a parameter
            return ir.AtomicCall(fn, ir.Deref(args[0]), tuple(args[1:]))
        return ir.AtomicCall(fn, args[0].x, tuple(args[1:]))

    def construct(self, ty, args: tuple[ir.Expr, ...]) -> RawCtor:
        return RawCtor(ty, args)

    def mat_inferred(self, kw: Token, args: tuple[ir.Expr, ...]) -> RawCtor:
        """``matCxR(...)``: the element type comes from the arguments (the typer's)."""
        return RawCtor(MatShape(int(str(kw)[3]), int(str(kw)[5])), args)

    @v_args(meta=True, inline=True)
    def bitcast(self, meta: Meta, ty, args) -> ir.Expr:
        if len(args) != 1:
            raise self._err(f"bitcast takes one argument, got {len(args)}", meta.line, meta.column)
        return ir.Bitcast(ty, args[0])

    def index(self, base: ir.Expr, i: ir.Expr) -> ir.Index:
        return ir.Index(base, i)

    def member(self, base: ir.Expr, name: Token) -> ir.Member:
        return ir.Member(base, str(name))

    def neg(self, x: ir.Expr) -> ir.Expr:
        # "-3" is one negative literal (the emitter prints negative literals that way); a u32
        # has no negation, "-0u" included, so its minus stays an operator for the typer to refuse.
        if isinstance(x, RawLit) and not x.negated and x.ty != u32:
            return RawLit(-x.value, x.ty, True)
        return ir.Unary(Op.NEG, x)

    def logic_not(self, x: ir.Expr) -> ir.Unary:
        return ir.Unary(Op.NOT, x)

    def bit_not(self, x: ir.Expr) -> ir.Unary:
        return ir.Unary(Op.BITNOT, x)

    @v_args(meta=True, inline=True)
    def address_of(self, meta: Meta, x: ir.Expr) -> RawAddress:
        # Only arrayLength(&binding) takes one (see call); anywhere else the typer refuses it.
        return RawAddress(x, meta.line, meta.column)

    def deref(self, x: ir.Expr) -> ir.Deref:
        return ir.Deref(x)

    mul = _binary(Op.MUL)
    div = _binary(Op.DIV)
    mod = _binary(Op.MOD)
    add = _binary(Op.ADD)
    sub = _binary(Op.SUB)
    shl = _binary(Op.SHL)
    shr = _binary(Op.SHR)
    lt = _binary(Op.LT)
    le = _binary(Op.LE)
    gt = _binary(Op.GT)
    ge = _binary(Op.GE)
    eq = _binary(Op.EQ)
    ne = _binary(Op.NE)
    bit_and = _binary(Op.AND)
    bit_or = _binary(Op.OR)
    bit_xor = _binary(Op.XOR)
    land = _binary(Op.LAND)
    lor = _binary(Op.LOR)

    # -- types --
    def named_type(self, tok: Token):
        name = str(tok)
        if name in self.aliases:
            return self.aliases[name]
        if name in SCALARS:
            return SCALARS[name]
        if name in VEC_ALIASES:
            return VEC_ALIASES[name]
        if name in MAT_ALIASES:
            return MAT_ALIASES[name]
        if name in UNSUPPORTED_TYPES or name.startswith(UNSUPPORTED_TYPE_PREFIXES):
            raise self._err(f"type '{name}'", tok.line, tok.column)
        return StructRef(name, tok.line, tok.column)

    def template_type(self, tok: Token, *args):
        if str(tok) == "atomic" and len(args) == 1:
            if args[0] not in (u32, i32):
                raise WgslTypeError(
                    f"atomic<{args[0]}>: WGSL's atomics are atomic<u32> and atomic<i32>",
                    self.filename,
                    tok.line,
                )
            return Atomic(args[0])
        if str(tok) == "ptr":
            return self._pointer_type(tok, args)
        raise self._err(f"type '{tok}<...>'", tok.line, tok.column)

    def _pointer_type(self, tok: Token, args) -> Ptr:
        """``ptr<space, T[, access]>``: the space and access are words (read as type names)."""
        words = [a.name if isinstance(a, StructRef) else None for a in args]
        if len(args) in (2, 3) and words[0] == "uniform":
            raise self._err(
                "ptr<uniform, ...> (pointers into uniform memory)", tok.line, tok.column
            )
        if len(args) in (2, 3) and words[0] in POINTER_SPACES and words[1] is not None:
            raise self._err(f"ptr<{words[0]}, {words[1]}> (pointers to structs)", tok.line,
                            tok.column)  # fmt: skip
        if len(args) not in (2, 3) or words[0] is None or words[1] is not None:
            raise WgslTypeError(
                "ptr takes an address space, a type and, for storage, an access mode "
                "(ptr<function, f32>, ptr<storage, array<u32>, read_write>)",
                self.filename,
                tok.line,
                tok.column,
            )
        space, store = words[0], args[1]
        if space not in POINTER_SPACES:
            raise WgslTypeError(
                f"ptr<{space}, ...>: the address space is one of {', '.join(POINTER_SPACES)}",
                self.filename,
                tok.line,
                tok.column,
            )
        if len(args) == 3:
            access = words[2]
            if access not in ("read", "read_write") or space != "storage":
                raise WgslTypeError(
                    f"ptr<{space}, {store}, {access or args[2]}>: an access mode is given for "
                    "storage only, read or read_write",
                    self.filename,
                    tok.line,
                    tok.column,
                )
        else:
            access = "read" if space == "storage" else "read_write"
        if not isinstance(store, (Scalar, Vec, Mat, Array, RuntimeArray, Atomic)):
            raise self._err(f"ptr<{space}, {store}> (pointers to scalars, vectors, matrices, arrays, atomics)",
                            tok.line, tok.column)  # fmt: skip
        return Ptr(space, store, access)

    def mat_type(self, kw: Token, elem) -> Mat:
        if elem not in (f32, f16):
            raise WgslTypeError(
                f"{kw}<{elem}>: a matrix's elements are f32 or f16", self.filename, kw.line,
                kw.column,
            )  # fmt: skip
        return Mat(int(str(kw)[3]), int(str(kw)[5]), elem)

    def vec_type(self, kw: Token, elem) -> Vec:
        if not isinstance(elem, Scalar):
            raise self._err(f"{kw}<{elem}>: a vector of a non-scalar", kw.line, kw.column)
        return Vec(int(str(kw)[3]), elem)

    @v_args(meta=True, inline=True)
    def runtime_array_type(self, meta: Meta, elem) -> RuntimeArray:
        if isinstance(elem, StructRef):
            return RuntimeArray(elem)  # an array of structs (resolved with the module's structs)
        if isinstance(elem, (Array, Mat)):
            return RuntimeArray(elem)  # of arrays or matrices: array<array<f32, 4>> (as words)
        return RuntimeArray(self._elem(elem, meta))

    @v_args(meta=True, inline=True)
    def fixed_array_type(self, meta: Meta, elem, count: ir.Expr) -> Array:
        n = const_int(count, self.consts, (self.filename, meta.line, meta.column))
        if n <= 0:
            raise self._err(f"array size {n} is not positive", meta.line, meta.column)
        if isinstance(elem, (Array, StructRef, Mat)):
            return Array(elem, n)  # nested: array<array<f32, 4>, 16>; of structs: resolved later
        return Array(self._elem(elem, meta), n)

    def _elem(self, elem, meta: Meta):
        """``elem`` when an array may hold it; else an error at the array type."""
        if isinstance(elem, RuntimeArray):
            raise WgslTypeError(
                f"array of {elem}: an array element type cannot contain a runtime-sized array",
                self.filename,
                meta.line,
                meta.column,
            )
        if not isinstance(elem, (Scalar, Vec, Atomic)):
            message = f"array of {elem}: only arrays of scalars, vectors and atomics"
            raise self._err(message, meta.line, meta.column)
        return elem
