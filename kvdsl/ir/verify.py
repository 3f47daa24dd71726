"""``verify(kernel)``: reject ill-typed or ill-formed IR before any WGSL exists.

The checker walks the kernel with a scope of declared names and derives the type of every
expression from the op table's typing rules. Each error names the offending node (printed
compactly by :func:`show`) and says what was expected.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass

import numpy as np

from kvdsl.ir import ops, uniformity
from kvdsl.ir.ops import Op
from kvdsl.ir.nodes import (
    BUILTIN_INPUTS,
    builtin_type,
    SUBGROUP_BUILTINS,
    Assign,
    Barrier,
    Binary,
    Binding,
    Block,
    Break,
    Call,
    Comment,
    Const,
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
    WorkgroupVar,
    _slot_init,
    walk,
)
from kvdsl.ir.uniformity import loop_behavior
from kvdsl.ir.types import (
    Array,
    RuntimeArray,
    Scalar,
    Struct,
    Type,
    Vec,
    bool_,
    f16,
    f32,
    i32,
    u32,
)

MAX_INVOCATIONS = 256  # WebGPU's default maxComputeInvocationsPerWorkgroup
MAX_WORKGROUP_BYTES = 16384  # WebGPU's default maxComputeWorkgroupStorageSize
SWIZZLE = "xyzw"
_COMPONENT = {c: i for i, c in enumerate(SWIZZLE)}
_INDEXED = frozenset(("binding", "workgroup"))  # kinds of names that are used only indexed


class VerifyError(ValueError):
    """The IR is ill-typed or ill-formed; the message names the node. ``node``: the statement
    at fault where the check knows it (the uniformity analysis does), else None."""

    def __init__(self, message: str, node: object | None = None) -> None:
        super().__init__(message)
        self.node = node


def show(node: object) -> str:
    """A compact, WGSL-like rendering of an expression for error messages."""
    match node:
        case Lit(value, ty):
            suffix = {"u32": "u", "i32": "i", "f32": "f", "f16": "h"}.get(ty.name, "")
            return f"{str(value).lower() if ty == bool_ else value}{suffix}"
        case Name(name):
            return name
        case Unary(op, x):
            return f"{ops.info(op).spelling}{show(x)}"
        case Binary(op, a, b):
            return f"({show(a)} {ops.info(op).spelling} {show(b)})"
        case Call(op, args):
            return f"{ops.info(op).spelling}({', '.join(map(show, args))})"
        case FnCall(name, args):
            return f"{name}({', '.join(map(show, args))})"
        case Convert(ty, x):
            return f"{ty}({show(x)})"
        case Construct(ty, args):
            return f"{ty}({', '.join(map(show, args))})"
        case Index(base, index):
            return f"{_primary(base)}[{show(index)}]"
        case Member(base, name):
            return f"{_primary(base)}.{name}"
        case Let(name, value):
            return f"let {name} = {show(value)}"
        case Var(name, ty, init):
            return f"var {name}: {ty}" + ("" if init is None else f" = {show(init)}")
        case Assign(target, value, op):
            eq = "=" if op is None else ops.info(op).spelling + "="
            return f"{show(target)} {eq} {show(value)}"
        case Barrier():
            return "workgroupBarrier()"
        case _:
            return type(node).__name__


def _primary(e: Expr) -> str:
    """``show(e)`` as the base of an index or a member: a unary operation parenthesised
    (``(~v).y``; a binary one shows its own parentheses)."""
    return f"({show(e)})" if type(e) is Unary else show(e)


@dataclass(frozen=True, slots=True)
class Symbol:
    """What a name in scope refers to."""

    ty: Type
    kind: str  # "let", "var", "const", "binding", "builtin", "param", "params", "workgroup"
    access: str = ""
    value: Expr | None = None  # a const's value, folded on demand (Checker.const_int)


_slot_init(Symbol)  # a Symbol per declaration: the cheaper __init__ of the IR nodes


class Scope:
    """Nested lexical scopes of declared names.

    Each scope keeps the names declared in it and a flat map of every name visible in it, copied
    from the outer scope when it is made: lookups are one dict access, however deep the nesting.
    So an inner scope sees the outer scope's names as of its creation, which is how the checker
    uses scopes (a block's scope is made, used and dropped while its outer block is paused).
    """

    __slots__ = ("names", "visible")

    def __init__(self, outer: Scope | None = None) -> None:
        self.names: dict[str, Symbol] = {}
        self.visible: dict[str, Symbol] = {} if outer is None else outer.visible.copy()

    def lookup(self, name: str) -> Symbol | None:
        return self.visible.get(name)

    def declare(self, name: str, sym: Symbol, node: object) -> None:
        if name not in _NAMES_OK:
            check_name(name, node)
        if name in self.names:
            raise VerifyError(f"{show(node)}: '{name}' is already declared in this scope")
        self.names[name] = sym
        self.visible[name] = sym


#: WGSL's keywords and reserved words (WGSL spec, "Keyword summary" and "Reserved words"): no
#: declaration may take one of these names.
KEYWORDS = frozenset(
    "alias break case const const_assert continue continuing default diagnostic discard else "
    "enable false fn for if let loop override requires return struct switch true var while".split()
)
RESERVED = frozenset(
    "NULL Self abstract active alignas alignof as asm asm_fragment async attribute auto await "
    "become cast catch class co_await co_return co_yield coherent column_major "
    "common compile compile_fragment concept const_cast consteval constexpr constinit crate "
    "debugger decltype delete demote demote_to_helper do dynamic_cast enum explicit export "
    "extends extern external fallthrough filter final finally friend from fxgroup get goto "
    "groupshared highp impl implements import inline instanceof interface layout lowp macro "
    "macro_rules match mediump meta mod module move mut mutable namespace new nil noexcept "
    "noinline nointerpolation noperspective null nullptr of operator package packoffset "
    "partition pass patch pixelfragment precise precision premerge priv protected pub public "
    "readonly ref regardless register reinterpret_cast require resource restrict self set "
    "shared sizeof smooth snorm static static_assert static_cast std subroutine super target "
    "template this thread_local throw trait try type typedef typeid typename typeof union "
    "unless unorm unsafe unsized use using varying virtual volatile wgsl where with writeonly "
    "yield".split()
)
#: Names WGSL predeclares that kvdsl reads as the type or builtin everywhere: its types and type
#: generators, and the builtin functions of the op table. WGSL lets a declaration shadow one
#: (``fn min(a: u32, b: u32) -> u32``, and then ``min(1u, 2u)`` calls it), but the IR's
#: ``Call(Op.MIN)`` would still mean the builtin: a silent other kernel, so no declaration may
#: take one. A struct member may (it shadows nothing).
PREDECLARED = frozenset(
    "bool i32 u32 f32 f16 vec2 vec3 vec4 mat2x2 mat2x3 mat2x4 mat3x2 mat3x3 mat3x4 mat4x2 mat4x3 "
    "mat4x4 array atomic ptr sampler sampler_comparison workgroupBarrier bitcast".split()
    + [f"vec{n}{t}" for n in (2, 3, 4) for t in "iufh"]
    + [f"mat{c}x{r}{t}" for c in (2, 3, 4) for r in (2, 3, 4) for t in "fh"]
    + [info.spelling for info in ops.TABLE.values() if info.kind == "builtin"]
)
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# Names already found valid: a catalog build declares the same few hundred names thousands of
# times, and the check is on every declaration.
_NAMES_OK: set[str] = set()


def name_problem(name: object, member: bool = False) -> str | None:
    """Why ``name`` cannot name a WGSL declaration, as ``name 'x' ...``, or None when it can: an
    identifier of ASCII letters, digits and ``_`` (the subset the frontend reads), not ``_``
    alone, not starting ``__``, neither a keyword nor a reserved word, nor (but for a struct
    ``member``) the name of a WGSL type or builtin function (:data:`PREDECLARED`)."""
    if name in _NAMES_OK:
        return None
    if not isinstance(name, str) or not _IDENTIFIER.match(name):
        why = "is not a WGSL identifier: give a letter or _, then letters, digits or _ (ASCII)"
    elif name == "_":
        why = "is not a WGSL identifier: _ alone is the phony assignment's"
    elif name.startswith("__"):
        why = "starts with __, which WGSL reserves"
    elif name in KEYWORDS:
        why = "is a WGSL keyword"
    elif name in RESERVED:
        why = "is a word WGSL reserves"
    elif name in PREDECLARED:
        if member:
            return None  # not remembered: the next declaration of it is no member
        why = (
            "is a WGSL type's or builtin function's, which kvdsl reads it as wherever it "
            "appears: give another"
        )
    else:
        _NAMES_OK.add(name)
        return None
    return f"name {name!r} {why}"


def check_name(name: object, node: object) -> None:
    """Raise :class:`VerifyError` where ``name`` cannot name the declaration ``node``
    (:func:`name_problem`; a params field is a struct member)."""
    problem = name_problem(name, member=type(node) is Struct)
    if problem is not None:
        raise VerifyError(f"{_declaring(node, name)}: {problem}")


def _declaring(node: object, name: object) -> str:
    """What declares ``name``, for an error: the statement, or the module-scope declaration."""
    kinds = {Binding: "binding", Const: "const", Struct: "params field", Function: "function",
             WorkgroupVar: "workgroup var", Kernel: "builtin parameter"}  # fmt: skip
    kind = kinds.get(type(node))
    return show(node) if kind is None else f"{kind} {name!r}"


_SHL, _SHR, _DIV, _MOD, _NEG, _CLAMP = Op.SHL, Op.SHR, Op.DIV, Op.MOD, Op.NEG, Op.CLAMP
_SELECT, _BITNOT = Op.SELECT, Op.BITNOT
# Integer builtins the folder evaluates (and select on a literal condition).
_INT_CALLS = {
    Op.MIN: min,
    Op.MAX: max,
    Op.ABS: lambda x: x if x == -(2**31) else abs(x),  # WGSL: i32's least value is its own abs
    Op.CLAMP: lambda x, lo, hi: min(max(x, lo), hi),
}
_LOW = {u32: 0, i32: -(2**31)}  # each integer type's range: [_LOW, _HIGH)
_HIGH = {u32: 2**32, i32: 2**31}


_FLOAT_BINARY = {Op.ADD: np.add, Op.SUB: np.subtract, Op.MUL: np.multiply, Op.DIV: np.divide,
                 Op.MOD: np.fmod}  # fmt: skip
_FLOAT_CALLS = {
    Op.ROUND: np.rint, Op.FLOOR: np.floor, Op.CEIL: np.ceil, Op.TRUNC: np.trunc,
    Op.SQRT: np.sqrt, Op.INVERSE_SQRT: lambda x: x.dtype.type(1) / np.sqrt(x), Op.EXP: np.exp,
    Op.LOG: np.log, Op.COS: np.cos, Op.SIN: np.sin, Op.ABS: np.abs, Op.MIN: np.minimum,
    Op.MAX: np.maximum, Op.CLAMP: lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi),
    Op.FMA: lambda a, b, c: a * b + c,
}  # fmt: skip
# Builtins whose argument has a bound: True, above 0; False, 0 or more.
_FLOAT_DOMAIN = {Op.LOG: True, Op.INVERSE_SQRT: True, Op.SQRT: False}


_NEVER_EXITS = (
    "the loop never exits: no break or return is reached in it (WGSL's behaviour analysis; "
    "Tint refuses it)"
)


def _loop_head(s: For) -> str:
    return (
        "for ("
        + "; ".join(show(x) if x is not None else "" for x in (s.init, s.cond, s.update))
        + ") { ... }"
    )


F16_MAX = 65504.0  # f16's largest finite value
_FLOAT_MAX = {np.float16: F16_MAX, np.float32: float(np.finfo(np.float32).max)}
_FLOATS: dict[tuple[object, str], np.floating] = {}


def _float_step(op: Op, a: np.floating, b: np.floating) -> np.floating:
    """``a op b`` (+, -, *, /, %) for two constants of one float type, as Tint evaluates a
    const-expression: in the next wider type (f16 in f32, f32 in f64), a result past the type's
    largest value refused even where it would round down to it (``65504.0h + 8.0h``,
    ``3.4028235e38f + 1.0e30f``), then rounded to the type; ``%`` is WGSL's ``x - y * trunc(x /
    y)`` computed in f32, whose quotient must be finite (``3.0e38f % 0.5f`` is refused,
    ``-65504.0h % 0.5h`` is not: tests/test_constant_operands.py holds these to Tint). f16
    values round to the nearest here; WGSL lets an implementation round them either way and
    Tint rounds toward zero (``-2.0h + 65504.0h`` is 65472.0h there, 65504.0h here), so a
    verdict that turns on how an inexact f16 result rounds (within a step of 65504, a
    ``clamp``'s bounds a step apart) is the implementation's. Raises a ``ValueError``
    naming the value past the range (or not finite); the caller names the expression."""
    dtype = type(a)
    wide = np.float64 if dtype is np.float32 else np.float32
    top = _FLOAT_MAX[dtype]
    with np.errstate(all="ignore"):
        if op is Op.MOD:  # every step in f32, for f32 and f16 alike (Tint's storage type)
            q = np.float32(a) / np.float32(b)
            if not np.isfinite(q):
                raise ValueError(q)
            v = np.float32(a) - np.float32(b) * np.trunc(q)
        else:
            v = _FLOAT_BINARY[op](wide(a), wide(b))
    if not np.isfinite(v) or abs(v) > top:
        raise ValueError(v)
    return dtype(v)


def _float_of(value: object, ty: Scalar) -> np.floating:
    """A literal's value in ``ty``'s precision (remembered: the catalog's few values recur;
    -0.0 apart from 0.0, which equal it as a key: 1.0 / -0.0 is -inf)."""
    key = (value, ty.name) if value else (value, ty.name, math.copysign(1.0, value))
    got = _FLOATS.get(key)
    if got is None:
        got = ty.dtype.type(value)
        if len(_FLOATS) < 4096:
            _FLOATS[key] = got
    return got


def _maybe_const(e: Expr, visible: dict[str, Symbol]) -> bool:
    """Whether ``e`` may be a constant (not a let, a var or another runtime name)."""
    return type(e) is not Name or visible[e.name].kind == "const"


def _const_shaped(e: Expr, visible: dict[str, Symbol]) -> bool:
    """Whether ``e`` is built of literals and module consts only (no load, let, var or
    builtin value): a cheap test before a vector's constants are folded."""
    t = type(e)
    if t is Lit:
        return True
    if t is Name:
        sym = visible.get(e.name)
        return sym is not None and sym.kind == "const"
    if t is Construct or t is Call:
        return all(_const_shaped(a, visible) for a in e.args)
    if t is Unary or t is Convert:
        return _const_shaped(e.x, visible)
    if t is Binary:
        return _const_shaped(e.a, visible) and _const_shaped(e.b, visible)
    if t is Member:
        return _const_shaped(e.base, visible)
    return False


#: The integer operators whose concrete result WGSL takes modulo 2**32, in const-expressions
#: too (gpuweb/gpuweb#4767, #4795: ``-1 * i32(-2147483648)`` is i32's least value). Tint does
#: so, and so does wgpu-native 0.32's naga (it refused the step before gfx-rs/wgpu#6023;
#: ``test_integer_constant_steps_that_wrap_compile_and_run_as_wgsl_says``).
_WRAPS = frozenset((Op.ADD, Op.SUB, Op.MUL))


def _picked(e: Call) -> Expr | None:
    """The arm a ``select`` on a literal condition takes (``select(f, t, true)`` is ``t``), or
    None where the condition is not a literal."""
    cond = e.args[2]
    if type(cond) is not Lit or type(cond.value) is not bool:
        return None
    return e.args[1] if cond.value else e.args[0]


def _spread(parts: tuple, n: int) -> tuple:
    """A scalar's components beside an ``n``-vector: the one value ``n`` times."""
    return parts * n if len(parts) == 1 else parts


def _wrap(v: int, ty: Scalar) -> int:
    """``v`` modulo 2**32, in ``ty``'s range (u32 or i32)."""
    v %= 2**32
    return v - 2**32 if ty is i32 and v >= 2**31 else v


def _fold(op: Op, a: int, b: int) -> int | None:
    """``a op b`` for the integer operators WGSL folds in const-expressions (exact: the checks
    compare against bounds), None for the rest and for a division by 0 (reported where it is)."""
    if op is Op.ADD:
        return a + b
    if op is Op.SUB:
        return a - b
    if op is Op.MUL:
        return a * b
    if op is Op.DIV or op is Op.MOD:
        if b == 0:
            return None
        q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)  # truncated, as WGSL's
        return q if op is Op.DIV else a - q * b
    if op is Op.SHL:
        return a << b if 0 <= b < 32 else None
    if op is Op.SHR:
        return a >> b if 0 <= b < 32 else None
    if op is Op.AND:
        return a & b
    if op is Op.OR:
        return a | b
    if op is Op.XOR:
        return a ^ b
    return None


def literal_ok(value: object, ty: Scalar) -> bool:
    """Whether ``value`` is representable as a literal of ``ty``."""
    if ty is u32:  # the common cases first, without comparing types by value
        return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**32
    if ty is i32:
        return isinstance(value, int) and not isinstance(value, bool) and -(2**31) <= value < 2**31
    if ty == bool_:
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if ty == u32:
        return isinstance(value, int) and 0 <= value < 2**32
    if ty == i32:
        return isinstance(value, int) and -(2**31) <= value < 2**31
    if not isinstance(value, (int, float)):
        return False
    key = (ty.name, type(value), value)  # True and 1 never get here; -0.0 and 0.0 agree
    if key in _FINITE:
        return True
    with np.errstate(over="ignore"):
        ok = bool(np.isfinite(ty.dtype.type(value)))
    if ok and len(_FINITE) < _FINITE_MAX:
        _FINITE.add(key)
    return ok


# (type name, value's type, value) of the float literals found finite: numpy's errstate and
# conversion cost microseconds per literal, and the builder and the checker both ask.
_FINITE: set[tuple[str, type, object]] = set()
_FINITE_MAX = 4096


class Checker:
    """Types expressions and checks statements against a scope."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.functions: dict[str, Function] = {}
        # Module consts folded on demand, by name: integer (value, type) (:meth:`_const`) and
        # float values (:meth:`_const_float`); None where one is not a constant of that kind.
        self.const_values: dict[str, tuple[int, Scalar] | None] = {}
        self.const_floats: dict[str, np.floating | None] = {}
        self.module: Scope | None = None  # the scope module consts are folded in
        self.used: set[str] = set()
        self.barriers = False  # a barrier or a subgroup builtin call: check_barriers runs
        self.stored: set[str] = set()

    # -- expressions --
    def type_of(self, e: Expr, scope: Scope) -> Type:
        """The type of ``e`` in ``scope``; raises :class:`VerifyError` when ill-typed."""
        if type(e) is Name:  # half of all expressions: the fast path
            name = e.name
            sym = scope.visible.get(name)
            if sym is None:
                raise VerifyError(f"undefined name '{name}'")
            kind = sym.kind
            if kind == "binding":
                raise VerifyError(f"binding '{name}' used without an index")
            if kind == "workgroup":
                raise VerifyError(f"workgroup var '{name}' used without an index")
            return sym.ty
        match e:
            case Binary(op, a, b):
                info = op._row  # ops.info(op), without the call
                if info.kind != "binary":
                    raise VerifyError(f"{show(e)}: {op.name} is not a binary operator")
                # An operand that is a plain name is typed here (type_of's fast path, without
                # the call); anything else, or a name type_of would reject, goes through it.
                visible = scope.visible
                if type(a) is Name and (sym := visible.get(a.name)) and sym.kind not in _INDEXED:
                    ta = sym.ty
                else:
                    ta = self.type_of(a, scope)
                if type(b) is Name and (sym := visible.get(b.name)) and sym.kind not in _INDEXED:
                    tb = sym.ty
                else:
                    tb = self.type_of(b, scope)
                try:
                    got = info.typing((ta, tb))
                except ops.OpTypeError as err:
                    raise VerifyError(f"{show(e)}: {info.spelling} {err}") from None
                # What WGSL refuses of scalar constants. The operators are tested by identity
                # against module globals: an enum member looked up on its class, or hashed, cost
                # ~4 ms over the catalog's Binary nodes.
                if got is f32 or got is f16:
                    if (type(a) is not Name or visible[a.name].kind == "const") and (
                        type(b) is not Name or visible[b.name].kind == "const"
                    ):
                        self._const_float(e, scope)  # raises where it is not finite
                elif type(got) is Vec and (got.elem is f32 or got.elem is f16):
                    if _const_shaped(e, visible):
                        self._const_num(e, scope)  # a vector of constants: raises as above
                elif op is _SHL or op is _SHR or op is _DIV or op is _MOD:
                    # The right operand's value where it is a constant, the common cases
                    # inline (a const name, a literal); a suspicious value is looked at.
                    if type(b) is Name:
                        sb = visible[b.name]
                        cv = self._int_const(b.name, sb) if sb.kind == "const" else None
                        v = None if cv is None else cv[0]
                    elif type(b) is Lit:
                        v = b.value if type(b.value) is int else None
                    else:
                        v = self.const_int(b, scope)
                        if v is None and isinstance(got, Vec) and got.elem.is_int:
                            self._const_vector_operands(e, scope)
                    if v is not None:
                        if isinstance(got, Vec) and type(e.a) is not Name:
                            # a vector left of constants: each component over v
                            self._const_vector_operands(e, scope)
                        else:
                            self._const_operands(e, v, scope)
                return got
            case Lit(value, ty):
                if ty is u32 and type(value) is int and 0 <= value < 4294967296:
                    return ty  # most literals: literal_ok's u32 case, inline
                if not isinstance(ty, Scalar) or not literal_ok(value, ty):
                    raise VerifyError(f"literal {value!r} is not a valid {ty} value")
                return ty
            case Member(base, name):
                if (
                    type(base) is Name
                    and (sym := scope.visible.get(base.name))
                    and sym.kind not in _INDEXED
                ):
                    bt = sym.ty  # a plain name (params, a vector), as for Binary's operands
                else:
                    bt = self.type_of(base, scope)
                if isinstance(bt, Struct):
                    ft = bt.field(name)
                    if ft is None:
                        fields = ", ".join(n for n, _ in bt.fields)
                        raise VerifyError(f"{show(e)}: {bt} has no field '{name}' ({fields})")
                    return ft
                if isinstance(bt, Vec):
                    if (
                        not name
                        or len(name) > 4
                        or any(SWIZZLE.find(c) not in range(bt.n) for c in name)
                    ):
                        raise VerifyError(f"{show(e)}: invalid swizzle '{name}' of {bt}")
                    return bt.elem if len(name) == 1 else Vec(len(name), bt.elem)
                raise VerifyError(f"{show(e)}: {bt} has no members")
            case Index(base, index):
                if (
                    type(index) is Name
                    and (sym := scope.visible.get(index.name))
                    and sym.kind not in _INDEXED
                ):
                    it = sym.ty  # a plain name, as for Binary's operands
                else:
                    it = self.type_of(index, scope)
                if it is not u32 and it is not i32 and it not in (i32, u32):
                    raise VerifyError(f"{show(e)}: index must be i32 or u32, got {it}")
                # A constant index (a plain name's symbol is at hand: no lookup again).
                if type(index) is Name:
                    cv = self._int_const(index.name, sym) if sym.kind == "const" else None
                    at = None if cv is None else cv[0]
                else:
                    at = self.const_int(index, scope)
                if at is not None and at < 0:
                    self._index_out_of_range(e, at, None)
                if isinstance(base, Name):
                    sym = scope.lookup(base.name)
                    if sym is not None and sym.kind == "binding":
                        self.used.add(base.name)
                        return sym.ty.elem
                    if sym is not None and sym.kind == "workgroup":
                        if at is not None and at >= sym.ty.n:
                            self._index_out_of_range(e, at, sym.ty.n)
                        return sym.ty.elem
                bt = self.type_of(base, scope)
                if isinstance(bt, (Array, Vec)):
                    if at is not None and at >= bt.n:
                        self._index_out_of_range(e, at, bt.n)
                    return bt.elem
                raise VerifyError(f"{show(e)}: cannot index a value of type {bt}")
            case Call(op, args):
                info = ops.info(op)
                if info.kind != "builtin" or len(args) != info.arity:
                    raise VerifyError(
                        f"{show(e)}: {info.spelling} takes {info.arity} arguments, got {len(args)}"
                    )
                got = self._apply(e, op, tuple(self.type_of(a, scope) for a in args))
                if info.subgroup:
                    self.barriers = True  # the uniformity analysis runs (check_barriers)
                if op is _CLAMP:
                    self._clamp_bounds(e, scope)
                visible = scope.visible
                if got is f32 or got is f16:
                    if all(_maybe_const(x, visible) for x in args):
                        self._const_float(e, scope)
                elif type(got) is Vec and (got.elem is f32 or got.elem is f16):
                    if _const_shaped(e, visible):
                        self._const_float_vector(e, scope)  # of float constants: raises
                elif op is Op.PACK2X16FLOAT and _const_shaped(e, visible):
                    self._f16_range(e, self._const_num(args[0], scope))
                return got
            case Convert(ty, x):
                src = self.type_of(x, scope)
                ok = (isinstance(ty, Scalar) and isinstance(src, Scalar)) or (
                    isinstance(ty, Vec) and isinstance(src, Vec) and src.n == ty.n
                )
                if not ok:
                    raise VerifyError(f"{show(e)}: cannot convert {src} to {ty}")
                if (ty is f32 or ty is f16) and _maybe_const(x, scope.visible):
                    self._const_float(e, scope)  # an f16 too small for the value, say
                elif type(ty) is Vec and (ty.elem is f32 or ty.elem is f16):
                    if _const_shaped(x, scope.visible):
                        self._const_float_vector(e, scope)  # the same, component by component
                return ty
            case Construct(ty, args):
                got = [self.type_of(a, scope) for a in args]
                if isinstance(ty, Vec):
                    n = sum(t.n if isinstance(t, Vec) else 1 for t in got)
                    if got == [ty.elem]:
                        n = ty.n  # one scalar: the splat vecN<T>(x)
                    if n != ty.n or any(t.scalar != ty.elem for t in got if hasattr(t, "scalar")):
                        raise VerifyError(f"{show(e)}: components do not make a {ty}")
                    if any(not isinstance(t, (Scalar, Vec)) for t in got):
                        raise VerifyError(f"{show(e)}: components do not make a {ty}")
                elif isinstance(ty, Array):
                    if len(got) != ty.n or any(t != ty.elem for t in got):
                        raise VerifyError(f"{show(e)}: components do not make a {ty}")
                else:
                    raise VerifyError(f"{show(e)}: cannot construct {ty}")
                return ty
            case Unary(op, x):
                return self._apply(e, op, (self.type_of(x, scope),))
            case FnCall(name, args):
                fn = self.functions.get(name)
                if fn is None:
                    raise VerifyError(f"{show(e)}: undefined function '{name}'")
                got = tuple(self.type_of(a, scope) for a in args)
                want = tuple(t for _, t in fn.params)
                if got != want:
                    raise VerifyError(
                        f"{show(e)}: {name} takes ({', '.join(map(str, want))}), "
                        f"got ({', '.join(map(str, got))})"
                    )
                if fn.ret is None:
                    raise VerifyError(f"{show(e)}: {name} returns no value")
                return fn.ret
        raise VerifyError(f"not an expression: {e!r}")

    def _int_const(self, name: str, sym: Symbol) -> tuple[int, Scalar] | None:
        """A module const's integer value and type (folded once, in the module's scope)."""
        if name not in self.const_values:
            self.const_values[name] = self._const(sym.value, self.module)
        return self.const_values[name]

    def _float_const(self, name: str, sym: Symbol) -> np.floating | None:
        """A module const's float value (folded once, in the module's scope)."""
        if name not in self.const_floats:
            self.const_floats[name] = self._const_float(sym.value, self.module)
        return self.const_floats[name]

    def const_int(self, e: Expr, scope: Scope) -> int | None:
        """The value of ``e`` where it is a u32 or i32 const-expression WGSL evaluates when it
        compiles (literals, module consts and arithmetic of them), else None. ``+``, ``-``,
        ``*`` and negation wrap modulo 2**32 as WGSL says (:data:`_WRAPS`); another step past
        the type's range (a left shift, i32's least value over -1) gives None, its own check
        refusing it where it stands."""
        got = self._const(e, scope)
        return None if got is None else got[0]

    def _const(self, e: Expr, scope: Scope) -> tuple[int, Scalar] | None:
        """:meth:`const_int` with the value's type."""
        t = type(e)
        if t is Lit:
            ty = e.ty
            return (e.value, ty) if (ty is u32 or ty is i32) and type(e.value) is int else None
        if t is Name:
            sym = scope.visible.get(e.name)
            return self._int_const(e.name, sym) if sym is not None and sym.kind == "const" else None
        if t is Binary:
            a = self._const(e.a, scope)
            b = None if a is None else self._const(e.b, scope)
            if b is None:
                return None
            v, ty = _fold(e.op, a[0], b[0]), a[1]
            if e.op in _WRAPS:
                v = _wrap(v, ty)
        elif t is Unary and (e.op is _NEG or e.op is _BITNOT):
            a = self._const(e.x, scope)
            if a is None:
                return None
            ty = a[1]
            v = _wrap(-a[0], ty) if e.op is _NEG else (~a[0] & 0xFFFFFFFF if ty is u32 else ~a[0])
        elif t is Member and len(e.name) == 1:
            # One component of a vector const-expression: vec2<u32>(0u, 8u).y is 8u to WGSL.
            base = self.type_of(e.base, scope)
            if not isinstance(base, Vec) or not (base.elem is u32 or base.elem is i32):
                return None
            parts = self._const_num(e.base, scope)
            if parts is None:
                return None
            return int(parts[_COMPONENT[e.name]]), base.elem
        elif t is Call and e.op is _SELECT:
            arm = _picked(e)
            return None if arm is None else self._const(arm, scope)
        elif t is Call and e.op in _INT_CALLS:
            args = [self._const(x, scope) for x in e.args]
            if any(a is None for a in args):
                return None
            ty = args[0][1]
            v = _INT_CALLS[e.op](*(a[0] for a in args))  # type: ignore[index]
        elif t is Convert and (e.ty is u32 or e.ty is i32):
            a = self._const(e.x, scope)
            if a is None:
                return None
            v, ty = _wrap(a[0], e.ty), e.ty  # between u32 and i32 WGSL keeps the bits
        else:
            return None
        if v is None or not _LOW[ty] <= v < _HIGH[ty]:
            return None
        return v, ty

    def _const_operands(
        self, e: Binary, v: int, scope: Scope, left: tuple[int, Scalar] | None = None
    ) -> None:
        """What WGSL rejects when it compiles a shift or an integer division whose right operand
        is the constant ``v``: a shift by the operand's bit width (32) or more, or a left shift
        of a constant that overflows; a division or remainder by 0, and i32's least value over
        -1. (A float divisor never has an integer value here.) ``left``: the left operand's
        constant where the caller has it (a vector's component), else it is looked up."""
        op = e.op
        if op is _SHL or op is _SHR:
            if v >= 32:
                raise VerifyError(
                    f"{show(e)}: a shift by {v}: integers have 32 bits (give 0 to 31)"
                )
        elif v == 0:
            what = "division" if op is _DIV else "remainder"
            raise VerifyError(f"{show(e)}: an integer {what} by the constant 0")
        elif v == -1 and (left or (self.const_int(e.a, scope),))[0] == -(2**31):
            raise VerifyError(f"{show(e)}: i32's least value over -1 does not fit an i32")
        if op is _SHL and (a := left or self._const(e.a, scope)) is not None:
            if not _LOW[a[1]] <= a[0] << v < _HIGH[a[1]]:
                raise VerifyError(
                    f"{show(e)}: {a[0]} shifted left by {v} does not fit {a[1]} (WGSL refuses "
                    "a constant shift that overflows)"
                )

    def _const_vector_operands(self, e: Binary, scope: Scope) -> None:
        """:meth:`_const_operands` for an integer vector operation whose right operand is
        built of constants (``vec2<u32>(0u, 1u)``, a splat, a scalar beside a vector), component
        by component, with the left operand's component where it is constant too
        (``vec2<i32>(CM, 1i) / -1i``): WGSL's rules hold per component."""
        right = self._const_num(e.b, scope)
        if right is None:
            return
        left = self._const_num(e.a, scope)
        n = max(len(right), 1 if left is None else len(left))  # a scalar beside the vector
        right = _spread(right, n)
        if left is not None:
            left = _spread(left, n)
        lt = self.type_of(e.a, scope)  # the left operand's type: a shift's right one is u32
        elem = lt.elem if isinstance(lt, Vec) else lt
        for i, v in enumerate(right):
            self._const_operands(e, int(v), scope, None if left is None else (int(left[i]), elem))

    def _const_num(self, e: Expr, scope: Scope) -> tuple[int | float, ...] | None:
        """The components of ``e`` (one for a scalar) where it is a constant: an integer
        const-expression (:meth:`const_int`), a float literal or const, its negation, or a vector
        built of such; else None."""
        t = type(e)
        if t is Construct:
            args = e.args
            if len(args) > 1 and all(x is args[0] for x in args):  # a splat: one value
                args = args[:1]
            parts = [self._const_num(a, scope) for a in args]
            if any(p is None for p in parts):
                return None
            flat = tuple(x for p in parts for x in p)  # type: ignore[union-attr]
            return flat * e.ty.n if len(args) == 1 and len(flat) == 1 else flat
        if t is Call and e.op is _SELECT:
            arm = _picked(e)
            return None if arm is None else self._const_num(arm, scope)
        if t is Call or t is Convert:
            got = self._const_float_vector(e, scope)
            if got is not None:
                return got
        if t is Binary and e.op in _FLOAT_BINARY:  # float vectors, component by component
            a = self._const_num(e.a, scope)
            b = None if a is None else self._const_num(e.b, scope)
            if b is None:
                return None
            if (len(a) > 1 or len(b) > 1) and all(isinstance(x, np.floating) for x in a + b):
                n, dtype = max(len(a), len(b)), type(a[0])
                pairs = zip(_spread(a, n), _spread(b, n))
                return tuple(self._step(e, e.op, dtype(x), dtype(y)) for x, y in pairs)
        if t in (Unary, Binary, Member, Call, Convert):
            ty = self.type_of(e, scope)
            if isinstance(ty, Vec) and ty.elem.is_int:  # None where a step leaves the range
                return self._const_int_vector(e, scope)
        if t is Unary and e.op is _NEG and type(e.x) is Construct:  # -vec4<f32>(...)
            p = self._const_num(e.x, scope)
            return None if p is None else tuple(-x for x in p)
        v = self.const_int(e, scope)
        if v is None:
            v = self._const_float(e, scope)
        return None if v is None else (v,)

    def _const_int_vector(self, e: Expr, scope: Scope) -> tuple[int, ...] | None:
        """The components of an integer vector const-expression of operators (``~``, ``-``, the
        arithmetic and bitwise ones, a swizzle) on vectors of constants, as WGSL evaluates it
        when it compiles; None where ``e`` is not one, or a step other than ``+``, ``-``, ``*``
        and negation (which wrap, as for scalars) leaves the type's range."""
        ty = self.type_of(e, scope)
        if not isinstance(ty, Vec) or not ty.elem.is_int:
            return None
        elem = ty.elem
        t = type(e)
        if t is Unary and (e.op is _NEG or e.op is _BITNOT):
            x = self._const_num(e.x, scope)
            if x is None:
                return None
            if e.op is _NEG:
                got = tuple(_wrap(-int(v), elem) for v in x)
            else:
                got = tuple(~int(v) & 0xFFFFFFFF if elem is u32 else ~int(v) for v in x)
        elif t is Binary:
            a, b = self._const_num(e.a, scope), self._const_num(e.b, scope)
            if a is None or b is None:
                return None
            pairs = zip(_spread(a, ty.n), _spread(b, ty.n))
            got = tuple(_fold(e.op, int(x), int(y)) for x, y in pairs)  # type: ignore
            if e.op in _WRAPS:
                got = tuple(_wrap(v, elem) for v in got)  # type: ignore[arg-type]
        elif t is Member:
            base = self._const_num(e.base, scope)
            if base is None:
                return None
            got = tuple(int(base[_COMPONENT[c]]) for c in e.name)
        elif t is Call and e.op in _INT_CALLS:  # min, max, abs, clamp, component by component
            args = [self._const_num(a, scope) for a in e.args]
            if any(a is None for a in args):
                return None
            wide = [_spread(a, ty.n) for a in args]  # type: ignore[arg-type]
            got = tuple(_INT_CALLS[e.op](*(int(a[i]) for a in wide)) for i in range(ty.n))
        elif t is Convert:  # between vec<u32> and vec<i32> WGSL keeps the bits
            x = self._const_num(e.x, scope)
            if x is None or not all(type(v) is int for v in x):
                return None
            got = tuple(_wrap(int(v), elem) for v in _spread(x, ty.n))
        else:
            return None
        if any(v is None or not _LOW[elem] <= v < _HIGH[elem] for v in got):
            return None
        return got  # type: ignore[return-value]

    def _const_float(self, e: Expr, scope: Scope) -> np.floating | None:
        """The value of ``e`` where it is a scalar f32 or f16 const-expression (literals, float
        consts, integer constants converted, arithmetic and builtins of them), in its type's
        precision, else None. Raises where WGSL would refuse it when it compiles: a constant
        that is not finite, or a builtin's argument outside its domain."""
        t = type(e)
        if t is Lit:
            ty = e.ty
            return _float_of(e.value, ty) if ty is f32 or ty is f16 else None
        if t is Name:
            sym = scope.visible.get(e.name)
            return (
                self._float_const(e.name, sym) if sym is not None and sym.kind == "const" else None
            )
        if t is Unary:
            x = self._const_float(e.x, scope) if e.op is _NEG else None
            return None if x is None else -x
        if t is Convert:
            if not (e.ty is f32 or e.ty is f16):
                return None
            i = self.const_int(e.x, scope)
            if i is None and type(e.x) is Lit and type(e.x.value) is bool:
                i = int(e.x.value)  # f32(true) is 1.0
            x = self._const_float(e.x, scope) if i is None else i
            if x is None:
                return None
            if e.ty is f16 and abs(float(x)) > F16_MAX:  # Tint's rule: no rounding down to it
                raise VerifyError(
                    f"{show(e)}: the constant {x} is past f16's largest value, {F16_MAX:g}: "
                    "WGSL refuses it when it compiles"
                )
            with np.errstate(all="ignore"):
                v = e.ty.dtype.type(x)
        elif t is Binary:
            a = self._const_float(e.a, scope) if e.op in _FLOAT_BINARY else None
            b = None if a is None else self._const_float(e.b, scope)
            if b is None:
                return None
            v = self._step(e, e.op, a, b)
        elif t is Call and e.op is _SELECT:
            arm = _picked(e)
            return None if arm is None else self._const_float(arm, scope)
        elif t is Call and e.op is Op.DOT:  # products, then their sum, step by step
            a, b = self._const_num(e.args[0], scope), self._const_num(e.args[1], scope)
            if a is None or b is None or not all(isinstance(x, np.floating) for x in a + b):
                return None
            v = self._step(e, Op.MUL, a[0], b[0])
            for x, y in zip(a[1:], b[1:]):
                v = self._step(e, Op.ADD, v, self._step(e, Op.MUL, x, y))
        elif t is Call:
            if e.op not in _FLOAT_CALLS:
                return None
            args = []
            for x in e.args:
                c = self._const_float(x, scope)
                if c is None:
                    return None
                args.append(c)
            return self._float_call(e, args)
        else:
            return None
        if not np.isfinite(v):
            raise VerifyError(
                f"{show(e)}: the constant is {v} in {type(v).__name__}: WGSL refuses a constant "
                "that is not finite when it compiles"
            )
        return v

    def _const_float_vector(self, e: Call | Convert, scope: Scope) -> tuple | None:
        """The components of a float vector builtin or conversion of constants (``sqrt(vec2<f32>(
        -1.0f, 1.0f))``, ``vec2<f16>(vec2<f32>(70000.0f))``, ``unpack2x16float(0x7c00u)``), each
        checked as a scalar one is; None where ``e`` is no such vector."""
        if type(e) is Convert:
            ty = e.ty
            if type(ty) is not Vec or not (ty.elem is f32 or ty.elem is f16):
                return None
            x = self._const_num(e.x, scope)
            if x is None:
                return None
            if ty.elem is f16:
                self._f16_range(e, x)
            with np.errstate(all="ignore"):
                return tuple(ty.elem.dtype.type(v) for v in _spread(x, ty.n))
        if e.op is Op.UNPACK2X16FLOAT:
            word = self.const_int(e.args[0], scope)
            if word is None:
                return None
            halves = np.array([word & 0xFFFF, word >> 16], np.uint16).view(np.float16)
            for h in halves:
                if not np.isfinite(h):
                    raise VerifyError(
                        f"{show(e)}: the constant is {h} in float16: WGSL refuses a constant "
                        "that is not finite when it compiles"
                    )
            return tuple(np.float32(h) for h in halves)
        if e.op not in _FLOAT_CALLS:
            return None
        parts = []
        for a in e.args:
            p = self._const_num(a, scope)
            if p is None or not all(isinstance(v, np.floating) for v in p):
                return None
            parts.append(p)
        n = max(len(p) for p in parts)
        if n == 1:
            return None  # a scalar: _const_float's
        wide = [_spread(p, n) for p in parts]
        return tuple(self._float_call(e, [w[i] for w in wide]) for i in range(n))

    def _f16_range(self, e: Expr, values: tuple | None) -> None:
        """WGSL refuses a constant converted to f16 (or packed into one) past f16's largest
        value; Tint refuses 65,519 too, which would round to 65,504."""
        for x in values or ():
            if abs(float(x)) > F16_MAX:
                raise VerifyError(
                    f"{show(e)}: the constant {x} is past f16's largest value, {F16_MAX:g}: "
                    "WGSL refuses it when it compiles"
                )

    def _float_call(self, e: Call, args: list) -> np.floating:
        """A float builtin of constant arguments (one component), as WGSL evaluates it when it
        compiles: an argument outside the builtin's domain or a result that is not finite is
        refused; ``fma`` goes step by step as Tint takes it."""
        low = _FLOAT_DOMAIN.get(e.op)
        if low is not None and not (args[0] > 0 if low else args[0] >= 0):
            raise VerifyError(
                f"{show(e)}: the constant argument {args[0]} is outside "
                f"{ops.info(e.op).spelling}'s domain (give "
                f"{'more than 0' if low else '0 or more'}): WGSL refuses it when it compiles"
            )
        if e.op is Op.FMA:  # a * b, then + c, each step as Tint takes it
            return self._step(e, Op.ADD, self._step(e, Op.MUL, args[0], args[1]), args[2])
        with np.errstate(all="ignore"):
            v = _FLOAT_CALLS[e.op](*args)
        if not np.isfinite(v):
            raise VerifyError(
                f"{show(e)}: the constant is {v} in {type(v).__name__}: WGSL refuses a constant "
                "that is not finite when it compiles"
            )
        return v

    def _step(self, e: Expr, op: Op, a: np.floating, b: np.floating) -> np.floating:
        """:func:`_float_step`, its refusal naming ``e``."""
        try:
            return _float_step(op, a, b)
        except ValueError as err:
            v, dtype = err.args[0], type(a)
        of = " (the quotient of its %)" if op is Op.MOD else ""
        if not np.isfinite(v):
            raise VerifyError(
                f"{show(e)}: the constant{of} is {dtype(v)} in {dtype.__name__}: WGSL refuses a "
                "constant that is not finite when it compiles"
            )
        name = "f16" if dtype is np.float16 else "f32"
        raise VerifyError(
            f"{show(e)}: the constant{of} {v:.9g} is past {name}'s largest value, "
            f"{_FLOAT_MAX[dtype]:.9g} (before rounding): WGSL refuses it when it compiles"
        )

    def _clamp_bounds(self, e: Call, scope: Scope) -> None:
        """WGSL refuses ``clamp(e, low, high)`` with constant bounds, low above high, in any
        component, when it compiles (a swapped QMIN and QMAX, say)."""
        low = self._const_num(e.args[1], scope)
        high = None if low is None else self._const_num(e.args[2], scope)
        if high is not None and any(lo > hi for lo, hi in zip(low, high)):
            raise VerifyError(
                f"{show(e)}: the constant low bound {show(e.args[1])} is above the high bound "
                f"{show(e.args[2])}"
            )

    def _index_out_of_range(self, e: Index, i: int, n: int | None) -> None:
        """WGSL rejects a constant index below 0, or at or past the ``n`` elements of a vector
        or a fixed-size array, when it compiles."""
        allowed = "0 or more" if n is None else f"0 to {n - 1}"
        raise VerifyError(f"{show(e)}: the constant index {i} is out of range (give {allowed})")

    def _apply(self, e: Expr, op: ops.Op, args: tuple[Type, ...]) -> Type:
        try:
            return ops.info(op).typing(args)
        except ops.OpTypeError as err:
            raise VerifyError(f"{show(e)}: {ops.info(op).spelling} {err}") from None

    # -- statements --
    def block(self, body: tuple[Stmt, ...], scope: Scope, ret: Type | None, loop: bool) -> None:
        for s in body:
            self.stmt(s, scope, ret, loop)

    def stmt(self, s: Stmt, scope: Scope, ret: Type | None, loop: bool) -> None:
        match s:
            # Cases by frequency: lets, comments and assignments are most statements.
            case Let(name, value):
                ty = self.type_of(value, scope)
                if not isinstance(ty, (Scalar, Vec, Array)):
                    raise VerifyError(f"{show(s)}: cannot bind a value of type {ty}")
                scope.declare(name, Symbol(ty, "let"), s)
            case Comment(text):
                if "\n" in text:
                    raise VerifyError(f"comment {text!r} spans several lines")
            case Var(name, ty, init):
                if not isinstance(ty, (Scalar, Vec, Array)):
                    raise VerifyError(f"{show(s)}: a var cannot have type {ty}")
                if init is not None and (got := self.type_of(init, scope)) is not ty and got != ty:
                    raise VerifyError(f"{show(s)}: initialiser is {got}, expected {ty}")
                scope.declare(name, Symbol(ty, "var"), s)
            case Assign(target, value, op):
                tt = self._target(s, target, scope)
                vt = self.type_of(value, scope)
                if op is not None:
                    if ops.info(op).kind != "binary" or op in ops.NO_COMPOUND:
                        raise VerifyError(f"{show(s)}: {op.name} has no compound assignment")
                    vt = self._apply(value, op, (tt, vt))
                    if op is _SHL or op is _SHR or op is _DIV or op is _MOD:
                        v = self.const_int(value, scope)
                        if v is not None:  # x <<= 40u
                            self._const_operands(Binary(op, target, value), v, scope)
                        elif isinstance(vt, Vec) and vt.elem.is_int:  # w /= vec2<i32>(0i, -1i)
                            self._const_vector_operands(Binary(op, target, value), scope)
                if vt is not tt and vt != tt:
                    raise VerifyError(
                        f"{show(s)}: cannot store {vt} into {show(target)} of type {tt}"
                    )
            case If(cond, then, orelse):
                self._cond(s, cond, scope)
                self.block(then, Scope(scope), ret, loop)
                if orelse != ():  # most ifs have no else: no scope to make for it
                    self.block(orelse, Scope(scope), ret, loop)
            case For(init, cond, update, body):
                if loop_behavior(body, cond is not None) == frozenset():
                    raise VerifyError(f"{_loop_head(s)}: {_NEVER_EXITS}")
                inner = Scope(scope)
                if init is not None:
                    self.stmt(init, inner, ret, loop)
                if cond is not None:
                    self._cond(s, cond, inner)
                if update is not None:
                    self.stmt(update, inner, ret, loop)
                self.block(body, Scope(inner), ret, True)
            case Loop(body):
                if loop_behavior(body, False) == frozenset():
                    raise VerifyError(f"loop {{ ... }}: {_NEVER_EXITS}")
                self.block(body, Scope(scope), ret, True)
            case Break() | Continue():
                if not loop:
                    raise VerifyError(f"{type(s).__name__.lower()} outside a loop")
            case Return(value):
                got = None if value is None else self.type_of(value, scope)
                if got is not ret and got != ret:
                    raise VerifyError(f"return of {got or 'nothing'}, expected {ret or 'nothing'}")
            case Block(body):
                self.block(body, Scope(scope), ret, loop)
            case Barrier():
                self.barriers = True  # where a barrier may stand: check_barriers
            case _:
                raise VerifyError(f"not a statement: {s!r}")

    def _cond(self, s: Stmt, cond: Expr, scope: Scope) -> None:
        ct = self.type_of(cond, scope)
        if ct is not bool_ and ct != bool_:
            raise VerifyError(f"{type(s).__name__} condition {show(cond)} is {ct}, expected bool")

    def _target(self, s: Stmt, target: Expr, scope: Scope) -> Type:
        root = target
        while isinstance(root, (Index, Member)):
            if type(root) is Member and len(root.name) > 1:
                # WGSL takes a reference of one component only: v.x = ..., not v.xy = ...
                raise VerifyError(
                    f"{show(s)}: cannot assign to the swizzle {show(root)} (WGSL writes one "
                    "component at a time)"
                )
            root = root.base
        if not isinstance(root, Name):
            raise VerifyError(f"{show(s)}: cannot assign to {show(target)}")
        sym = scope.lookup(root.name)
        if sym is None:
            raise VerifyError(f"{show(s)}: undefined name '{root.name}'")
        if sym.kind == "binding":
            if sym.access != "read_write":
                raise VerifyError(f"{show(s)}: binding '{root.name}' is read-only")
            if not isinstance(target, Index) or (target.base is not root and target.base != root):
                raise VerifyError(f"{show(s)}: a binding is written one element at a time")
            self.stored.add(root.name)
        elif sym.kind == "workgroup":
            element = isinstance(target, Index) and target.base == root
            lane = (
                isinstance(target, Index)
                and isinstance(target.base, Index)
                and target.base.base == root
                and isinstance(sym.ty.elem, Vec)
            )
            if not (element or lane):
                raise VerifyError(
                    f"{show(s)}: workgroup var '{root.name}' is written one element at a time "
                    "(or one lane of a vector element, `w[i][lane]`)"
                )
        elif sym.kind != "var":
            raise VerifyError(f"{show(s)}: '{root.name}' is a {sym.kind}, not a var")
        return self.type_of(target, scope)


def module_scope(kernel: Kernel, checker: Checker) -> Scope:
    """The scope holding module consts, bindings, params and the entry point's builtins."""
    scope = Scope()
    checker.module = scope
    for c in kernel.consts:
        if not isinstance(c.ty, Scalar):
            raise VerifyError(f"const {c.name}: type {c.ty} is not a scalar")
        got = checker.type_of(c.value, scope)
        if got is not c.ty and got != c.ty:
            raise VerifyError(f"const {c.name}: value {show(c.value)} is {got}, declared {c.ty}")
        scope.declare(c.name, Symbol(c.ty, "const", "", c.value), c)
        if (c.ty is f32 or c.ty is f16) and not isinstance(c.value, Lit):
            checker._float_const(c.name, scope.visible[c.name])  # finite: checked now
    for b in kernel.bindings:
        if b.access not in ("read", "read_write"):
            raise VerifyError(f"binding '{b.name}': access '{b.access}' is not read or read_write")
        if not isinstance(b.elem, (Scalar, Vec)) or b.elem == bool_:
            raise VerifyError(f"binding '{b.name}': element type {b.elem} cannot be stored")
        if b.data is not None and not _host_fits(b):
            raise VerifyError(
                f"binding '{b.name}': host data {b.data} does not tile element type {b.elem}"
            )
        scope.declare(b.name, Symbol(RuntimeArray(b.elem), "binding", b.access), b)
    if kernel.params is not None:
        for fname, fty in kernel.params.fields:
            check_name(fname, kernel.params)
            if not isinstance(fty, (Scalar, Vec)) or fty.scalar == bool_:
                raise VerifyError(f"params field '{fname}': type {fty} cannot be uniform")
        scope.declare("params", Symbol(kernel.params, "params"), kernel.params)
    total = 0
    for w in kernel.workgroup_vars:
        if not isinstance(w, WorkgroupVar) or not isinstance(w.ty, Array):
            raise VerifyError(f"workgroup var {w!r} is not a WorkgroupVar of an array type")
        if not isinstance(w.ty.elem, (Scalar, Vec)) or not isinstance(w.ty.n, int) or w.ty.n < 1:
            raise VerifyError(f"workgroup var '{w.name}': type {w.ty} is not an array of scalars")
        total += workgroup_bytes(w.ty)
        if total > MAX_WORKGROUP_BYTES:
            raise VerifyError(
                f"workgroup var '{w.name}': {w.ty} brings workgroup memory to {total} bytes, "
                f"more than {MAX_WORKGROUP_BYTES}"
            )
        scope.declare(w.name, Symbol(w.ty, "workgroup"), w)
    return scope


def workgroup_bytes(ty: Array) -> int:
    """Bytes ``ty`` takes in workgroup memory (WGSL's array stride: vec3 elements take 16)."""
    elem = ty.elem
    stride = elem.size if isinstance(elem, Scalar) else max(elem.size, elem.align)
    return stride * ty.n


def check_barriers(kernel: Kernel) -> None:
    """A ``workgroupBarrier()`` must be reached by every invocation of a workgroup or none, and a
    ``subgroupShuffleXor()`` by every invocation of a subgroup with the same mask: WGSL's
    uniformity analysis (:mod:`kvdsl.ir.uniformity`), helper functions included (a helper
    holding one is called only where control flow, and the arguments its barrier depends on,
    are uniform)."""
    try:
        uniformity.check(kernel)
    except uniformity.UniformityError as err:
        raise VerifyError(str(err), node=err.node) from None


def verify(kernel: Kernel, checker: Checker | None = None) -> Kernel:
    """Check ``kernel``; return it unchanged or raise :class:`VerifyError` naming the problem.
    ``checker``: a :class:`Checker` of ``kernel`` to check with (a subclass that watches what
    it types, :mod:`kvdsl.ir.portability`'s); a fresh one by default."""
    checker = Checker(kernel) if checker is None else checker
    scope = module_scope(kernel, checker)
    wg = kernel.workgroup_size
    if len(wg) != 3 or any(not isinstance(n, int) or n < 1 for n in wg):
        raise VerifyError(f"workgroup size {wg} must be three positive integers")
    if wg[0] * wg[1] * wg[2] > MAX_INVOCATIONS:
        raise VerifyError(
            f"workgroup size {wg} has {wg[0] * wg[1] * wg[2]} invocations, at most {MAX_INVOCATIONS}"
        )
    if kernel.workgroup_size_name is not None:
        c = kernel.const(kernel.workgroup_size_name)
        if c is None or c.value != Lit(wg[0], u32):
            raise VerifyError(
                f"workgroup size const '{kernel.workgroup_size_name}' must be declared as {wg[0]}u"
            )
    for fn in kernel.functions:
        check_name(fn.name, fn)
        if fn.name == "main" or scope.lookup(fn.name) is not None or fn.name in checker.functions:
            raise VerifyError(f"function {fn.name}: the name is taken at module scope")
        inner = Scope(scope)
        for pname, pty in fn.params:
            inner.declare(pname, Symbol(pty, "param"), fn)
        checker.block(fn.body, inner, fn.ret, False)
        if fn.ret is not None and not (fn.body and isinstance(fn.body[-1], Return)):
            raise VerifyError(f"function {fn.name} must end with a return")
        checker.functions[fn.name] = fn
    main = Scope(scope)
    for pname, builtin in kernel.builtins:
        if builtin not in BUILTIN_INPUTS:
            raise VerifyError(f"unknown compute builtin '{builtin}' ({', '.join(BUILTIN_INPUTS)})")
        ty = builtin_type(builtin)
        main.declare(pname, Symbol(ty, "builtin"), kernel)
    checker.block(kernel.body, main, None, False)
    if checker.barriers:  # a barrier or a shuffle, in the entry point or a helper
        check_barriers(kernel)
    for b in kernel.bindings:
        if b.name not in checker.used:
            raise VerifyError(f"binding '{b.name}' is declared but never used")
        if b.access == "read_write" and b.name not in checker.stored:
            raise VerifyError(f"binding '{b.name}' is read_write but never written")
    if kernel.dispatch is not None:
        d = kernel.dispatch
        if checker.type_of(d.items, scope) != u32:
            raise VerifyError(f"dispatch items {show(d.items)} must be u32")
        if d.per_group < 1 or not 1 <= d.fold <= 65535:
            raise VerifyError(f"dispatch per_group {d.per_group} / fold {d.fold} out of range")
    return kernel


def _host_fits(b: Binding) -> bool:
    """Whether ``b.data`` is a numeric scalar whose values tile ``b.elem`` (no vec3 padding)."""
    d, e = b.data, b.elem
    if not isinstance(d, Scalar) or d == bool_ or (isinstance(e, Vec) and e.n == 3):
        return False
    return e.scalar.size % d.size == 0


def uses_subgroups(kernel: Kernel) -> bool:
    """Whether the kernel takes a subgroup builtin value or calls a subgroup builtin function
    (needs ``enable subgroups;``)."""
    if any(builtin in SUBGROUP_BUILTINS for _, builtin in kernel.builtins):
        return True
    return any(type(n) is Call and n.op in ops.SUBGROUP_OPS for n in walk(kernel))


def uses_f16(kernel: Kernel) -> bool:
    """Whether any declaration or expression of the kernel mentions f16 (needs ``enable f16;``).

    A binding's host ``data`` type is not part of the module: f16 data moved as ``u32`` words
    needs no ``enable f16;``.
    """
    if any(b.data is not None for b in kernel.bindings):
        plain = tuple(dataclasses.replace(b, data=None) for b in kernel.bindings)
        kernel = dataclasses.replace(kernel, bindings=plain)
    return any(type(n) is Scalar and n.name == "f16" for n in walk(kernel))
