"""IR values with Python operators: :class:`Val` and the functions that build expressions.

A :class:`Val` is a typed handle on an IR expression. Arithmetic, bitwise and comparison
operators build :class:`~kvdsl.ir.tree.Binary` nodes and check operand types at once; a plain
Python number adapts to the other operand's type, like WGSL's abstract numerics. Python ``==``
keeps its meaning, so equality is spelt ``a.eq(b)`` / ``a.ne(b)``. Statements and declarations
are the :class:`~kvdsl.ir.builder.KernelBuilder`'s.
"""

from __future__ import annotations

from math import copysign
from typing import Callable, Iterator, Union

from kvdsl.ir import tree as ir
from kvdsl.ir import ops
from kvdsl.ir.consteval import SWIZZLE, literal_ok
from kvdsl.ir.ops import Op
from kvdsl.ir.scope import VerifyError
from kvdsl.ir.show import show
from kvdsl.ir.types import (
    Array,
    RuntimeArray,
    Scalar,
    Struct,
    Type,
    Vec,
    bitcastable,
    bool_,
    components,
    f32,
    i32,
    u32,
)

Num = Union[int, float, bool]


class BuildError(VerifyError):
    """An expression or statement the builder cannot make (mixed types, bad literal ...)."""


def lit(value: Num, ty: Scalar) -> Val:
    """A literal of type ``ty``; rejects values the type cannot hold."""
    if type(ty) is not Scalar:
        if type(value) is Scalar:
            raise BuildError(
                "lit: the value comes first, then its scalar type (e.g. lit(3, u32)); got "
                f"{describe(value)} first"
            )
        raise BuildError(
            "lit: the second argument is the literal's scalar type (e.g. lit(3, u32)), not "
            f"{describe(ty)}"
        )
    if ty is u32 or ty is i32:  # most literals: no float conversion to make
        if not literal_ok(value, ty):
            raise BuildError(f"literal {value!r} does not fit {ty}")
        return Val(ir.Lit(value, ty), ty)
    if type(value) is not float and ty.is_float and isinstance(value, int):  # floats skip it
        if not isinstance(value, bool):
            value = float(value)
    if type(value) is float and (ty is f32 or ty.is_float):
        # -0.0 equals 0.0 (and hashes alike): the sign keeps their entries apart.
        key = (ty.name, value, copysign(1.0, value))
        held = _FLOAT_HELD.get(key)
        if held is None:
            if not literal_ok(value, ty):
                raise BuildError(f"literal {value!r} does not fit {ty}")
            held = _float_held(value, ty)
            if len(_FLOAT_HELD) < _FLOAT_HELD_MAX:
                _FLOAT_HELD[key] = held
        return Val(ir.Lit(held, ty), ty)
    if not literal_ok(value, ty):
        raise BuildError(f"literal {value!r} does not fit {ty}")
    if ty.is_float:
        value = _float_held(value, ty)
    return Val(ir.Lit(value, ty), ty)


def _float_held(value: Num, ty: Scalar) -> float:
    # f32: the shortest decimal of the value the type holds, what its WGSL text reads back as.
    # f16: the value itself, which the printer spells exactly: WGSL lets an implementation round
    # an f16 literal's decimal either way, and Tint rounds it toward zero where naga rounds to
    # nearest (31.62h is 31.609375h to Tint, 31.625h to naga).
    v = ty.dtype.type(value)
    return float(v) if ty.name == "f16" else float(str(v))


# (type name, value, sign) -> the value a float type holds: numpy's conversion and str() cost
# microseconds per literal, and kernels repeat a few constants (0.0, 1.0, eps ...) many times.
_FLOAT_HELD: dict[tuple[str, float, float], float] = {}
_FLOAT_HELD_MAX = 4096


def _default_type(value: Num) -> Scalar:
    if isinstance(value, bool):
        return bool_
    return f32 if isinstance(value, float) else i32


def describe(x: object) -> str:
    """What ``x`` is, in words, for a message that says what was expected instead."""
    if isinstance(x, Val):
        return f"the value {show(x.node)} ({x.ty})"
    if isinstance(x, str):
        return f"the text {x!r}"
    if isinstance(x, Op):
        return f"the op Op.{x.name}"
    if isinstance(x, (Scalar, Vec, Array, RuntimeArray, Struct)):
        return f"the type {x}"
    if isinstance(x, bool):
        return f"the bool {x}"
    if isinstance(x, (int, float)):
        return f"the number {x!r}"
    return repr(x)


def _not_a_value(x: object, what: str = "") -> BuildError:
    """The error for ``x`` given where ``what`` (an IR value or a number) was expected."""
    if not what:
        return BuildError(f"expected an IR value or a number, not {describe(x)}")
    return BuildError(f"{what} must be an IR value or a number, not {describe(x)}")


def as_val(x: Val | Num, like: Type | None = None, what: str = "") -> Val:
    """``x`` as a Val; a Python number takes the scalar type of ``like`` (WGSL abstract numerics).
    ``what``: the argument ``x`` is, named in the error when it is neither."""
    if isinstance(x, Val):
        return x
    if type(x) is int:  # most literals: an index or a count, the range checks inline
        if like is u32:
            if 0 <= x < 4294967296:
                return Val(ir.Lit(x, u32), u32)
        elif like is i32:
            if -2147483648 <= x < 2147483648:
                return Val(ir.Lit(x, i32), i32)
    elif type(x) is float and like is f32:
        return lit(x, f32)
    if isinstance(x, (bool, int, float)):
        ty = like.scalar if isinstance(like, (Scalar, Vec)) else _default_type(x)
        if isinstance(x, float) and ty.is_int:
            raise BuildError(f"float literal {x!r} cannot become {ty}")
        return lit(x, ty)
    raise _not_a_value(x, what)


def _typed(op: Op, node: ir.Expr, args: tuple[Type, ...]) -> Val:
    try:
        return Val(node, op._row.typing(args))
    except ops.OpTypeError as err:
        raise BuildError(f"{show(node)}: {ops.info(op).spelling} {err}") from None


def binary(op: Op, a: Val | Num, b: Val | Num) -> Val:
    """``a op b`` with literal adaptation; a shift amount literal is always u32."""
    for x, side in ((a, "left"), (b, "right")):
        if not isinstance(x, _OPERANDS):
            raise _not_a_value(x, f"{ops.info(op).spelling}: the {side} operand")
    if op is Op.SHL or op is Op.SHR:
        a = as_val(a)  # a literal shifted is i32, as WGSL's abstract int becomes
        b = as_val(b, u32 if not isinstance(a.ty, Vec) else Vec(a.ty.n, u32))
    elif isinstance(a, Val):
        if not isinstance(b, Val):
            b = as_val(b, a.ty)
    else:
        b = as_val(b)
        a = as_val(a, b.ty)
    return _typed(op, ir.Binary(op, a.node, b.node), (a.ty, b.ty))


def _an_op(op: object) -> Op:
    """``call``'s ``op``, refused where it is not a builtin of the op table."""
    if not isinstance(op, Op):
        named = ops.builtin_named(op) if isinstance(op, str) else None
        example = "Op.ABS" if named is None else f"Op.{named.name}"
        raise BuildError(f"call: op must be an Op (e.g. {example}), not {describe(op)}")
    if op not in ops.BUILTINS:
        raise BuildError(
            f"call: Op.{op.name} is the operator {ops.info(op).spelling}, not a builtin "
            "function: apply it to values (a + b, -a) or give a builtin (e.g. Op.ABS)"
        )
    return op


def call(op: Op, *args: Val | Num) -> Val:
    """A builtin call; literal arguments adapt to the first typed argument (a vector's literal
    becomes the splat ``vecN<T>(x)``, as builtins take no mixed vector/scalar operands)."""
    info = _an_op(op)._row
    if len(args) != info.arity:
        raise BuildError(
            f"call: {info.spelling} takes {info.arity} argument{'s' * (info.arity != 1)}, "
            f"got {len(args)}"
        )
    spec = info.operands or ("T",) * info.arity
    like = None
    for a, k in zip(args, spec):
        if k == "T" and isinstance(a, Val) and a.ty is not bool_ and a.ty != bool_:
            like = a.ty
            break
    nodes, types = [], []
    for i, a in enumerate(args):
        k = spec[i]
        if isinstance(a, Val):
            v = a
        elif not isinstance(a, _OPERANDS):
            raise _not_a_value(a, f"{info.spelling}: argument {i + 1}")
        elif op is Op.SELECT and i == 2:
            v = as_val(a, bool_)
        elif k == "I":
            v = construct(Vec(like.n, i32), a) if isinstance(like, Vec) else as_val(a, i32)
        elif k != "T":
            v = construct(k, a) if isinstance(k, Vec) else as_val(a, k)
        elif isinstance(like, Vec):
            v = construct(like, a)
        else:
            v = as_val(a, like)
        nodes.append(v.node)
        types.append(v.ty)
    return _typed(op, ir.Call(op, tuple(nodes)), tuple(types))


def select(f: Val | Num, t: Val | Num, cond: Val | bool) -> Val:
    """WGSL ``select(f, t, cond)``: ``t`` where ``cond`` holds, else ``f`` (false first)."""
    return call(Op.SELECT, f, t, cond)


def min_(a: Val | Num, b: Val | Num) -> Val:
    return call(Op.MIN, a, b)


def max_(a: Val | Num, b: Val | Num) -> Val:
    return call(Op.MAX, a, b)


def clamp(e: Val | Num, lo: Val | Num, hi: Val | Num) -> Val:
    return call(Op.CLAMP, e, lo, hi)


def round_(x: Val) -> Val:
    return call(Op.ROUND, x)


def inverse_sqrt(x: Val) -> Val:
    return call(Op.INVERSE_SQRT, x)


def cos(x: Val) -> Val:
    return call(Op.COS, x)


def sin(x: Val) -> Val:
    return call(Op.SIN, x)


def dot(a: Val, b: Val) -> Val:
    return call(Op.DOT, a, b)


def shuffle_xor(x: Val, mask: Val | int) -> Val:
    """WGSL ``subgroupShuffleXor(x, mask)``: ``x`` as the invocation of this subgroup whose
    subgroup lane is this one's xor ``mask`` holds it (``mask`` uniform, below the subgroup size;
    the module then enables ``subgroups``)."""
    return call(Op.SUBGROUP_SHUFFLE_XOR, x, as_val(mask, u32))


def pack2x16float(x: Val) -> Val:
    """WGSL ``pack2x16float(x)``: the two f32 lanes of ``x`` as f16 halves of one u32 (lane 0 in
    the low bits); needs no ``enable f16;``."""
    return call(Op.PACK2X16FLOAT, x)


def unpack2x16float(w: Val) -> Val:
    """WGSL ``unpack2x16float(w)``: the two f16 halves of the u32 ``w`` as a ``vec2<f32>``."""
    return call(Op.UNPACK2X16FLOAT, w)


def convert(ty: Scalar | Vec, x: Val | Num) -> Val:
    """``ty(x)``; a conversion to the value's own type is the value itself."""
    if type(ty) is not Scalar and type(ty) is not Vec:
        if isinstance(ty, (Val, bool, int, float)):
            raise BuildError(
                "convert: the first argument is the target type (e.g. convert(i32, x)); got "
                f"{describe(ty)} first"
            )
        raise BuildError(
            f"convert: the target type must be a scalar or vector type, not {describe(ty)}"
        )
    x = as_val(x, ty, "convert: the value to convert")
    if x.ty is ty or x.ty == ty:
        return x
    ok = (isinstance(ty, Scalar) and isinstance(x.ty, Scalar)) or (
        isinstance(ty, Vec) and isinstance(x.ty, Vec) and x.ty.n == ty.n
    )
    if not ok:
        raise BuildError(f"cannot convert {x.ty} to {ty}")
    return Val(ir.Convert(ty, x.node), ty)


def bitcast(ty: Scalar | Vec, x: Val) -> Val:
    """``bitcast<ty>(x)``: the 32 bits of each component of ``x`` read as ``ty``'s (``u32``,
    ``i32`` or ``f32``, as many components as ``x``)."""
    x = as_val(x, None, "bitcast: the value")
    if not (bitcastable(ty) and bitcastable(x.ty) and components(ty) == components(x.ty)):
        raise BuildError(
            "bitcast: takes a u32, i32 or f32 scalar or vector to one of those with as many"
            f" components, not {x.ty} to {describe(ty)}"
        )
    return Val(ir.Bitcast(ty, x.node), ty)


def construct(ty: Vec | Array, *args: Val | Num) -> Val:
    """``vecN<T>(...)`` or ``array<T, N>(...)`` from components."""
    if type(ty) is not Vec and type(ty) is not Array:
        raise BuildError(
            "construct: the first argument is a vector or array type (e.g. "
            f"construct(vec(2, f32), x, y)); got {describe(ty)}"
        )
    for i, a in enumerate(args):
        if not isinstance(a, _OPERANDS):
            raise _not_a_value(a, f"construct: component {i + 1}")
    vals = [as_val(a, ty.elem) for a in args]
    # One scalar for a vector is WGSL's splat vecN<T>(x); verify checks the components.
    return Val(ir.Construct(ty, tuple(v.node for v in vals)), ty)


def _operator(op: Op, doc: str | None = None) -> Callable[[Val, Val | Num], Val]:
    """``Val``'s method for ``a op b``: :func:`binary`, with its commonest cases (another value, a
    u32 literal beside a u32) inline; any operand it would reject goes through it for the error."""
    typing = op._row.typing

    def method(self: Val, o: Val | Num) -> Val:
        try:
            if isinstance(o, Val):
                return Val(ir.Binary(op, self.node, o.node), typing((self.ty, o.ty)))
            if type(o) is int and self.ty is u32 and 0 <= o < 4294967296:
                return Val(ir.Binary(op, self.node, ir.Lit(o, u32)), typing((u32, u32)))
        except ops.OpTypeError:
            pass
        return binary(op, self, o)

    method.__doc__ = doc
    return method


def _reflected(op: Op) -> Callable[[Val, Num], Val]:
    """``Val``'s method for ``o op self`` where ``o``, on the left, is a Python number."""

    def method(self: Val, o: Num) -> Val:
        return binary(op, o, self)

    return method


def _component(c: str) -> property:
    """``Val``'s property ``v.c``: the component ``c`` of a vector (``v.member(c)``)."""
    return property(lambda self: self.member(c), doc=f"The ``{c}`` component of a vector.")


class Val:
    """A typed IR expression with Python operators."""

    __slots__ = ("node", "ty")

    def __init__(self, node: ir.Expr, ty: Type) -> None:
        self.node = node
        self.ty = ty

    def __repr__(self) -> str:
        return f"Val({self.node!r}: {self.ty})"

    __hash__ = None  # type: ignore[assignment]

    def __bool__(self) -> bool:
        raise BuildError("an IR value has no Python truth value: use kb.if_() or select()")

    def __iter__(self) -> Iterator[Val]:
        # Without this, Python would iterate through __getitem__ forever (v[0], v[1], ...).
        raise BuildError("an IR value is not a Python sequence: index it (v[i], v.x) instead")

    def __contains__(self, o: object) -> bool:
        raise BuildError("`in` on an IR value would iterate it: compare elements with .eq()")

    def __eq__(self, o: object) -> bool:  # type: ignore[override]
        raise BuildError("`==` on IR values would compare Python objects: use a.eq(b)")

    def __ne__(self, o: object) -> bool:  # type: ignore[override]
        raise BuildError("`!=` on IR values would compare Python objects: use a.ne(b)")

    # arithmetic
    __add__ = _operator(Op.ADD)
    __radd__ = _reflected(Op.ADD)

    __sub__ = _operator(Op.SUB)
    __rsub__ = _reflected(Op.SUB)

    __mul__ = _operator(Op.MUL)
    __rmul__ = _reflected(Op.MUL)

    __truediv__ = _operator(Op.DIV)
    __rtruediv__ = _reflected(Op.DIV)

    __floordiv__ = __truediv__
    __rfloordiv__ = __rtruediv__

    __mod__ = _operator(Op.MOD)
    __rmod__ = _reflected(Op.MOD)

    __and__ = _operator(Op.AND)
    __rand__ = _reflected(Op.AND)

    __or__ = _operator(Op.OR)
    __ror__ = _reflected(Op.OR)

    __xor__ = _operator(Op.XOR)

    __lshift__ = _operator(Op.SHL)

    __rshift__ = _operator(Op.SHR)

    def __neg__(self):
        return _typed(Op.NEG, ir.Unary(Op.NEG, self.node), (self.ty,))

    def __invert__(self):
        op = Op.NOT if self.ty == bool_ else Op.BITNOT
        return _typed(op, ir.Unary(op, self.node), (self.ty,))

    # comparisons (== and != stay Python's: use eq / ne)
    __lt__ = _operator(Op.LT)

    __le__ = _operator(Op.LE)

    __gt__ = _operator(Op.GT)

    __ge__ = _operator(Op.GE)

    eq = _operator(Op.EQ)

    ne = _operator(Op.NE)

    land = _operator(Op.LAND, "Short-circuit ``self && o``.")

    lor = _operator(Op.LOR, "Short-circuit ``self || o``.")

    def to(self, ty: Scalar | Vec) -> Val:
        """Convert to ``ty``."""
        return convert(ty, self)

    # access
    def __getitem__(self, index: Val | int) -> Val:
        if not isinstance(self.ty, (Array, Vec)):
            raise BuildError(f"cannot index a value of type {self.ty}")
        idx = as_val(index, u32)
        return Val(ir.Index(self.node, idx.node), self.ty.elem)

    def member(self, name: str) -> Val:
        """A params field or a swizzle (``v.member('xy')``)."""
        if isinstance(self.ty, Struct):
            ft = self.ty.field(name)
            if ft is None:
                raise BuildError(f"{self.ty} has no field '{name}'")
            return Val(ir.Member(self.node, name), ft)
        if isinstance(self.ty, Vec):
            if len(name) == 1 and SWIZZLE.find(name) in range(self.ty.n):  # one component
                return Val(ir.Member(self.node, name), self.ty.elem)
            if any(SWIZZLE.find(c) not in range(self.ty.n) for c in name) or not 0 < len(name) <= 4:
                raise BuildError(f"invalid swizzle '{name}' of {self.ty}")
            ty = self.ty.elem if len(name) == 1 else Vec(len(name), self.ty.elem)
            return Val(ir.Member(self.node, name), ty)
        raise BuildError(f"{self.ty} has no members")

    x = _component("x")
    y = _component("y")
    z = _component("z")
    w = _component("w")


#: What an operand or an argument may be: an IR value, or a Python number that adapts.
_OPERANDS = (Val, bool, int, float)
