"""The op table: the single source of truth for every operator and builtin.

Each :class:`Op` has one :class:`OpInfo` row giving its WGSL spelling, its arity, where it sits
in WGSL's expression grammar (used to print minimal parentheses and to check the parser), its
typing rule, and its numpy implementation with WGSL's exact semantics. The emitter, the
interpreter, the verifier and the frontend all read this table; ``tests/ir/test_ir.py`` checks that
every row is complete.

WGSL's expression grammar is not a plain precedence ladder: shifts and bitwise operators take
only unary operands, relations do not chain, and ``&&``/``||`` chain only with themselves. The
levels below encode it: an operand whose level exceeds the op's ``lhs_max``/``rhs_max`` is
parenthesised, except that a ``chain`` op accepts itself on the left.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Callable

import numpy as np

from kvdsl.ir import library as lib
from kvdsl.ir.types import Mat, Scalar, Type, Vec, bool_, f32, i32, result_struct, u32

# Precedence levels, tightest first.
PRIMARY, UNARY, MUL, ADD, SHIFT, REL, BIT, LOGIC = range(8)


class Op(enum.Enum):
    """Every operator and builtin function of the IR."""

    NEG = "neg"
    NOT = "not"
    BITNOT = "bitnot"
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"
    MOD = "mod"
    SHL = "shl"
    SHR = "shr"
    LT = "lt"
    LE = "le"
    GT = "gt"
    GE = "ge"
    EQ = "eq"
    NE = "ne"
    AND = "and"
    OR = "or"
    XOR = "xor"
    LAND = "land"
    LOR = "lor"
    MIN = "min"
    MAX = "max"
    CLAMP = "clamp"
    SELECT = "select"
    ABS = "abs"
    ROUND = "round"
    FLOOR = "floor"
    CEIL = "ceil"
    TRUNC = "trunc"
    SQRT = "sqrt"
    INVERSE_SQRT = "inverseSqrt"
    EXP = "exp"
    LOG = "log"
    COS = "cos"
    SIN = "sin"
    DOT = "dot"
    FMA = "fma"
    SUBGROUP_SHUFFLE_XOR = "subgroupShuffleXor"
    PACK2X16FLOAT = "pack2x16float"
    UNPACK2X16FLOAT = "unpack2x16float"
    # The rest of WGSL's numeric, bit and packing library (kvdsl/ir/library.py).
    POW = "pow"
    SIGN = "sign"
    FRACT = "fract"
    STEP = "step"
    SMOOTHSTEP = "smoothstep"
    MIX = "mix"
    SATURATE = "saturate"
    DEGREES = "degrees"
    RADIANS = "radians"
    LDEXP = "ldexp"
    QUANTIZE_TO_F16 = "quantizeToF16"
    EXP2 = "exp2"
    LOG2 = "log2"
    TAN = "tan"
    ASIN = "asin"
    ACOS = "acos"
    ATAN = "atan"
    ATAN2 = "atan2"
    SINH = "sinh"
    COSH = "cosh"
    TANH = "tanh"
    ASINH = "asinh"
    ACOSH = "acosh"
    ATANH = "atanh"
    LENGTH = "length"
    DISTANCE = "distance"
    NORMALIZE = "normalize"
    CROSS = "cross"
    REFLECT = "reflect"
    REFRACT = "refract"
    FACE_FORWARD = "faceForward"
    ALL = "all"
    ANY = "any"
    COUNT_ONE_BITS = "countOneBits"
    COUNT_LEADING_ZEROS = "countLeadingZeros"
    COUNT_TRAILING_ZEROS = "countTrailingZeros"
    FIRST_LEADING_BIT = "firstLeadingBit"
    FIRST_TRAILING_BIT = "firstTrailingBit"
    REVERSE_BITS = "reverseBits"
    EXTRACT_BITS = "extractBits"
    INSERT_BITS = "insertBits"
    DOT4I8PACKED = "dot4I8Packed"
    DOT4U8PACKED = "dot4U8Packed"
    PACK4XI8 = "pack4xI8"
    PACK4XU8 = "pack4xU8"
    PACK4XI8CLAMP = "pack4xI8Clamp"
    PACK4XU8CLAMP = "pack4xU8Clamp"
    UNPACK4XI8 = "unpack4xI8"
    UNPACK4XU8 = "unpack4xU8"
    PACK4X8SNORM = "pack4x8snorm"
    PACK4X8UNORM = "pack4x8unorm"
    PACK2X16SNORM = "pack2x16snorm"
    PACK2X16UNORM = "pack2x16unorm"
    UNPACK4X8SNORM = "unpack4x8snorm"
    UNPACK4X8UNORM = "unpack4x8unorm"
    UNPACK2X16SNORM = "unpack2x16snorm"
    UNPACK2X16UNORM = "unpack2x16unorm"
    # WGSL's subgroup builtins (the ``subgroups`` extension), besides subgroupShuffleXor.
    SUBGROUP_ADD = "subgroupAdd"
    SUBGROUP_MUL = "subgroupMul"
    SUBGROUP_MIN = "subgroupMin"
    SUBGROUP_MAX = "subgroupMax"
    SUBGROUP_AND = "subgroupAnd"
    SUBGROUP_OR = "subgroupOr"
    SUBGROUP_XOR = "subgroupXor"
    SUBGROUP_EXCLUSIVE_ADD = "subgroupExclusiveAdd"
    SUBGROUP_INCLUSIVE_ADD = "subgroupInclusiveAdd"
    SUBGROUP_EXCLUSIVE_MUL = "subgroupExclusiveMul"
    SUBGROUP_INCLUSIVE_MUL = "subgroupInclusiveMul"
    SUBGROUP_BROADCAST = "subgroupBroadcast"
    SUBGROUP_BROADCAST_FIRST = "subgroupBroadcastFirst"
    SUBGROUP_SHUFFLE = "subgroupShuffle"
    SUBGROUP_SHUFFLE_UP = "subgroupShuffleUp"
    SUBGROUP_SHUFFLE_DOWN = "subgroupShuffleDown"
    SUBGROUP_BALLOT = "subgroupBallot"
    SUBGROUP_ALL = "subgroupAll"
    SUBGROUP_ANY = "subgroupAny"
    SUBGROUP_ELECT = "subgroupElect"
    # Matrix builtins.
    TRANSPOSE = "transpose"
    DETERMINANT = "determinant"
    # Builtins whose result is a struct (its fields read with ``.``).
    FREXP = "frexp"
    MODF = "modf"


@dataclass(frozen=True, slots=True)
class OpInfo:
    """One row of the op table."""

    spelling: str
    arity: int
    kind: str  # "unary", "binary" or "builtin"
    level: int
    lhs_max: int
    rhs_max: int
    chain: bool
    typing: Callable[[tuple[Type, ...]], Type]
    impl: Callable[..., np.ndarray]
    # Transcendental and approximate builtins: GPU results agree with numpy only within the
    # accuracy WGSL states for them; everything else must agree bit for bit.
    approximate: bool = False
    # Subgroup builtins read other invocations' values: the interpreter evaluates them against
    # its invocation grid (``impl`` is never called) and a module using one enables subgroups.
    subgroup: bool = False
    # What each argument's abstract literal is typed from (the frontend's typer and the
    # builder's ``call``): "T" the operands' common type (from the context when ``generic`` says
    # the result has that type too), "I" i32 of its shape, or a fixed type.
    # None: every argument is "T".
    operands: tuple[str | Type, ...] | None = None
    generic: bool = True


class OpTypeError(ValueError):
    """An op applied to operand types its typing rule rejects."""


# ---- typing rules -----------------------------------------------------------------------------


def _same(args: tuple[Type, ...], what: str, pred: Callable[[str], bool]) -> Type:
    """The one type of ``args``, whose scalar's name satisfies ``pred``."""
    first = args[0]
    for a in args[1:]:
        if a is not first and a != first:
            raise OpTypeError(f"operands of different types: {', '.join(map(str, args))}")
    cls = type(first)
    if cls is Scalar:
        name = first.name
    elif cls is Vec or isinstance(first, (Scalar, Vec)):
        name = first.scalar.name
    else:
        raise OpTypeError(f"expects {what} operands, got {first}")
    if not pred(name):
        raise OpTypeError(f"expects {what} operands, got {first}")
    return first


# Predicates on a scalar type's name (C-level calls: typing runs for every operator built).
_IS_NUMERIC = "bool".__ne__
_IS_INT = frozenset(("i32", "u32")).__contains__
_IS_FLOAT = frozenset(("f32", "f16")).__contains__
_IS_SIGNED = frozenset(("f32", "f16", "i32")).__contains__
_IS_INT_OR_BOOL = frozenset(("i32", "u32", "bool")).__contains__


def _any(name: str) -> bool:
    return True


def _arith(args: tuple[Type, ...]) -> Type:
    a, b = args
    if a is b and type(a) is Scalar and a.name != "bool":
        return a  # the common case: the same numeric scalar on both sides
    # WGSL allows a vector with a scalar of its element type on either side.
    if isinstance(a, Vec) and b == a.elem:
        b = a
    elif isinstance(b, Vec) and a == b.elem:
        a = b
    return _same((a, b), "numeric", _IS_NUMERIC)


def _sum(args: tuple[Type, ...]) -> Type:
    """``+`` and ``-``: :func:`_arith`, and two matrices of one type."""
    a, b = args
    if type(a) is Mat or type(b) is Mat:
        if a != b:
            raise OpTypeError(f"adds or subtracts matrices of one type, got {a} and {b}")
        return a
    return _arith(args)


def _product(args: tuple[Type, ...]) -> Type:
    """``*``: :func:`_arith`, and WGSL's matrix products: a matrix by its element type (either
    side), ``matCxR * vecC -> vecR``, ``vecR * matCxR -> vecC``, ``matKxR * matCxK -> matCxR``."""
    a, b = args
    if type(a) is not Mat and type(b) is not Mat:
        return _arith(args)
    if type(a) is Mat and b == a.elem:
        return a
    if type(b) is Mat and a == b.elem:
        return b
    if type(a) is Mat and type(b) is Vec and b == Vec(a.c, a.elem):
        return a.column
    if type(a) is Vec and type(b) is Mat and a == b.column:
        return Vec(b.c, b.elem)
    if type(a) is Mat and type(b) is Mat and a.elem == b.elem and a.c == b.r:
        return Mat(b.c, a.r, a.elem)
    raise OpTypeError(
        f"has no product of {a} and {b} (matCxR * vecC, vecR * matCxR, matKxR * matCxK, or a "
        "matrix by its element type)"
    )


def _transpose(args: tuple[Type, ...]) -> Type:
    (m,) = args
    if type(m) is not Mat:
        raise OpTypeError(f"takes a matrix, got {m}")
    return Mat(m.r, m.c, m.elem)


def _determinant(args: tuple[Type, ...]) -> Type:
    (m,) = args
    if type(m) is not Mat or m.c != m.r:
        raise OpTypeError(f"takes a square matrix, got {m}")
    return m.elem


def _bitwise(args: tuple[Type, ...]) -> Type:
    return _same(args, "integer or bool", _IS_INT_OR_BOOL)


def _shift(args: tuple[Type, ...]) -> Type:
    a, b = args
    if not isinstance(a, (Scalar, Vec)) or not a.scalar.is_int:
        raise OpTypeError(f"shifts an integer, got {a}")
    want = u32 if isinstance(a, Scalar) else Vec(a.n, u32)
    if b != want:
        raise OpTypeError(f"shift amount must be {want}, got {b}")
    return a


def _compare(args: tuple[Type, ...]) -> Type:
    t = _same(args, "scalar or vector", _any)
    return bool_ if isinstance(t, Scalar) else Vec(t.n, bool_)


def _order(args: tuple[Type, ...]) -> Type:
    _same(args, "numeric", _IS_NUMERIC)
    return _compare(args)


def _logic(args: tuple[Type, ...]) -> Type:
    if any(a != bool_ for a in args):
        raise OpTypeError(f"expects bool operands, got {', '.join(map(str, args))}")
    return bool_


def _neg(args: tuple[Type, ...]) -> Type:
    return _same(args, "signed numeric", _IS_SIGNED)


def _int(args: tuple[Type, ...]) -> Type:
    return _same(args, "integer", _IS_INT)


def _numeric(args: tuple[Type, ...]) -> Type:
    return _same(args, "numeric", _IS_NUMERIC)


def _float(args: tuple[Type, ...]) -> Type:
    return _same(args, "float", _IS_FLOAT)


def _select(args: tuple[Type, ...]) -> Type:
    f, t, c = args
    if f != t:
        raise OpTypeError(f"select branches differ: {f} and {t}")
    if not isinstance(f, (Scalar, Vec)):
        raise OpTypeError(f"selects a scalar or a vector, got {f}")
    want = bool_ if isinstance(f, Scalar) else Vec(f.n, bool_)
    if c != want and c != bool_:
        raise OpTypeError(f"select condition must be {want}, got {c}")
    return f


def _dot(args: tuple[Type, ...]) -> Type:
    t = _same(args, "numeric vector", _IS_NUMERIC)
    if not isinstance(t, Vec):
        raise OpTypeError(f"dot takes vectors, got {t}")
    return t.elem


def _fixed(want: tuple[Type, ...], result: Type) -> Callable[[tuple[Type, ...]], Type]:
    """A builtin of fixed argument types (``pack4xI8(vec4<i32>) -> u32``)."""

    def rule(args: tuple[Type, ...]) -> Type:
        if args != want:
            raise OpTypeError(
                f"expects ({', '.join(map(str, want))}), got ({', '.join(map(str, args))})"
            )
        return result

    return rule


def _signed(args: tuple[Type, ...]) -> Type:
    return _same(args, "float or i32", _IS_SIGNED)


def _float_vec(args: tuple[Type, ...]) -> Type:
    t = _float(args)
    if not isinstance(t, Vec):
        raise OpTypeError(f"takes a float vector, got {t}")
    return t


def _cross(args: tuple[Type, ...]) -> Type:
    t = _float_vec(args)
    if t.n != 3:
        raise OpTypeError(f"takes 3-component vectors, got {t}")
    return t


def _refract(args: tuple[Type, ...]) -> Type:
    """``refract(e1, e2, e3)``: two float vectors and their element type's ratio ``e3``."""
    a, b, e = args
    t = _float_vec((a, b))
    if e != t.elem:
        raise OpTypeError(f"the ratio of indices (the third argument) must be {t.elem}, got {e}")
    return t


def _float_elem(args: tuple[Type, ...]) -> Type:
    """``length`` and ``distance``: a float scalar or vector in, its scalar out."""
    return _float(args).scalar


def _mix(args: tuple[Type, ...]) -> Type:
    a, b, t = args
    if isinstance(a, Vec) and t == a.elem:
        t = a  # mix(vecN, vecN, scalar)
    return _float((a, b, t))


def _ldexp(args: tuple[Type, ...]) -> Type:
    x, e = args
    t = _float((x,))
    want = i32 if isinstance(t, Scalar) else Vec(t.n, i32)
    if e != want:
        raise OpTypeError(f"the exponent must be {want}, got {e}")
    return t


def _bool_vec(args: tuple[Type, ...]) -> Type:
    (t,) = args
    if t != bool_ and not (isinstance(t, Vec) and t.elem == bool_):
        raise OpTypeError(f"takes a bool or bool vector, got {t}")
    return bool_


def _extract(args: tuple[Type, ...]) -> Type:
    t = _int(args[:1])
    if args[1:] != (u32, u32):
        raise OpTypeError(f"offset and count must be u32, got {args[1]} and {args[2]}")
    return t


def _insert(args: tuple[Type, ...]) -> Type:
    t = _int(args[:2])
    if args[2:] != (u32, u32):
        raise OpTypeError(f"offset and count must be u32, got {args[2]} and {args[3]}")
    return t


def _result_of(builtin: str) -> Callable[[tuple[Type, ...]], Type]:
    """``frexp`` and ``modf``: a float scalar or vector in, its result struct out."""

    def rule(args: tuple[Type, ...]) -> Type:
        return result_struct(builtin, _float(args))

    return rule


# ---- numpy implementations with WGSL semantics ------------------------------------------------


def _is_int(x: np.ndarray) -> bool:
    return x.dtype.kind in "iu"


def _div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if not _is_int(a):
        with np.errstate(all="ignore"):
            return (a / b).astype(a.dtype)
    # Integer division truncates; x / 0 == x; i32 MIN / -1 == MIN (both as WGSL defines).
    bad = _int_guard(a, b)
    if bad is None:
        if a.dtype.kind == "u":
            return a // b
        return _trunc_div(a, b)
    safe = np.where(bad, b.dtype.type(1), b)
    q = a // safe if a.dtype.kind == "u" else _trunc_div(a, safe)
    return np.where(bad, a, q)


def _mod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if not _is_int(a):
        with np.errstate(all="ignore"):
            return np.fmod(a, b).astype(a.dtype)
    # Truncated remainder (sign of the dividend); x % 0 == 0; i32 MIN % -1 == 0.
    bad = _int_guard(a, b)
    safe = b if bad is None else np.where(bad, b.dtype.type(1), b)
    with np.errstate(all="ignore"):
        # a - (a / b) * b: numpy's integer remainder is much slower than its division.
        q = a // safe if a.dtype.kind == "u" else _trunc_div(a, safe)
        r = a - q * safe
    return r if bad is None else np.where(bad, a.dtype.type(0), r)


def _int_guard(a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """Where integer ``a / b`` needs WGSL's special case (b == 0, i32 MIN / -1), or None."""
    bad = b == 0
    if a.dtype == np.int32:
        bad = bad | ((a == np.int32(-(2**31))) & (b == -1))
    return bad if bad.any() else None


def _trunc_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Signed division rounding toward zero (numpy's ``//`` floors); no zero or overflow case."""
    with np.errstate(all="ignore"):
        q = a // b
        fix = (q * b != a) & ((a < 0) != (b < 0))
    return (q + fix.astype(q.dtype)).astype(a.dtype, copy=False)


def _wrap(f: Callable) -> Callable:
    """Apply ``f`` with overflow warnings off and the result cast back to the first operand's dtype."""

    def run(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            return f(a, b).astype(np.result_type(a, b), copy=False)

    return run


def _shift_impl(f: Callable) -> Callable:
    def run(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        # The shift amount is taken modulo the bit width.
        return f(a, (b.astype(np.uint32) & np.uint32(31)).astype(a.dtype)).astype(a.dtype)

    return run


def _float_fn(f: Callable) -> Callable:
    def run(x: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            return f(x).astype(x.dtype)

    return run


def _neg_impl(x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return (-x).astype(x.dtype)


def _abs_impl(x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.abs(x).astype(x.dtype)  # i32 MIN stays MIN, as WGSL wraps


def _clamp(e: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return np.minimum(np.maximum(e, lo), hi)


def _select_impl(f: np.ndarray, t: np.ndarray, c: np.ndarray) -> np.ndarray:
    c = np.asarray(c)
    if c.ndim and c.ndim < np.ndim(t):
        c = c[..., None]  # a scalar condition selects whole vectors (vectors are [..., n])
    return np.where(c, t, f)


def _subgroup_value(what: str, pred: Callable[[str], bool]) -> Callable:
    """A subgroup reduction or scan: one scalar or vector operand of ``what``, the same type out."""

    def rule(args: tuple[Type, ...]) -> Type:
        (x,) = args
        if not isinstance(x, (Scalar, Vec)) or not pred(x.scalar.name):
            raise OpTypeError(f"expects {what} scalar or vector, got {x}")
        return x

    return rule


def _subgroup_lane(what: str) -> Callable:
    """``subgroupShuffle``/``Up``/``Down``/``Xor``/``Broadcast``: a numeric value and a u32
    ``what`` (WGSL takes an i32 lane too, naga only u32)."""

    def rule(args: tuple[Type, ...]) -> Type:
        x, lane = args
        if lane != u32:
            raise OpTypeError(f"expects a u32 {what}, got {lane}")
        if not isinstance(x, (Scalar, Vec)) or x.scalar.name == "bool":
            raise OpTypeError(f"expects a numeric scalar or vector, got {x}")
        return x

    return rule


def _subgroup_bool(result: Type) -> Callable:
    def rule(args: tuple[Type, ...]) -> Type:
        if args != (bool_,):
            raise OpTypeError(f"expects a bool, got {', '.join(map(str, args))}")
        return result

    return rule


def _subgroup_elect(args: tuple[Type, ...]) -> Type:
    if args:
        raise OpTypeError("takes no arguments")
    return bool_


def _pack2x16(args: tuple[Type, ...]) -> Type:
    if args[0] != Vec(2, f32):
        raise OpTypeError(f"expects vec2<f32>, got {args[0]}")
    return u32


def _unpack2x16(args: tuple[Type, ...]) -> Type:
    if args[0] != u32:
        raise OpTypeError(f"expects u32, got {args[0]}")
    return Vec(2, f32)


def _pack2x16float(x: np.ndarray) -> np.ndarray:
    """Each lane rounded to f16 (nearest, ties to even), lane 0 in the low 16 bits. WGSL leaves
    a lane past f16's finite range indeterminate; here it becomes infinity, as ``f16(x)`` does."""
    with np.errstate(over="ignore", invalid="ignore"):
        bits = np.asarray(x, np.float32).astype(np.float16).view(np.uint16).astype(np.uint32)
    return bits[..., 0] | (bits[..., 1] << np.uint32(16))


def _unpack2x16float(w: np.ndarray) -> np.ndarray:
    """The low and high 16 bits of ``w`` read as f16, widened exactly to f32."""
    w = np.asarray(w, np.uint32)
    halves = np.stack([w & np.uint32(0xFFFF), w >> np.uint32(16)], axis=-1).astype(np.uint16)
    return halves.view(np.float16).astype(np.float32)


def _needs_grid(*args: np.ndarray) -> np.ndarray:
    raise TypeError("a subgroup builtin reads other invocations: only the interpreter runs it")


def _dot_impl(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.sum(a * b, axis=-1, dtype=a.dtype)


_multiply = _wrap(np.multiply)


def _mat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``*`` with a matrix operand. A matrix value is ``[L, C, R]`` (column-major: ``m[:, c]`` is
    column ``c``), a vector ``[L, N]``, a scalar ``[L]``. Each product and each partial sum rounds
    to the element type (f16 matrices compute in float16), summed in index order."""
    if a.ndim < 3 and b.ndim < 3:
        return _multiply(a, b)
    with np.errstate(all="ignore"):
        if a.ndim == 1 or b.ndim == 1:  # a matrix by a scalar
            s, m = (a, b) if a.ndim == 1 else (b, a)
            return (m * s.reshape(-1, 1, 1)).astype(m.dtype)
        if a.ndim == 3 and b.ndim == 2:  # matCxR * vecC: the columns weighted by v
            terms = [a[:, k, :] * b[:, k : k + 1] for k in range(a.shape[1])]
        elif a.ndim == 2:  # vecR * matCxR: v dotted with each column
            terms = [a[:, k : k + 1] * b[:, :, k] for k in range(b.shape[2])]
        else:  # matKxR * matCxK: column c is a * (column c of b)
            terms = [a[:, k : k + 1, :] * b[:, :, k : k + 1] for k in range(a.shape[1])]
        out = terms[0]
        for t in terms[1:]:
            out = out + t
    return out.astype((a if a.ndim == 3 else b).dtype, copy=False)


def _transpose_impl(m: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.swapaxes(m, 1, 2))


def _determinant_impl(m: np.ndarray) -> np.ndarray:
    """The cofactor expansion along the first column, each step in the element type."""
    n = m.shape[1]
    with np.errstate(all="ignore"):
        if n == 2:
            return (m[:, 0, 0] * m[:, 1, 1] - m[:, 1, 0] * m[:, 0, 1]).astype(m.dtype)
        out = None
        for r in range(n):
            rows = [k for k in range(n) if k != r]
            minor = _determinant_impl(np.ascontiguousarray(m[:, 1:, :][:, :, rows]))
            term = m[:, 0, r] * minor
            out = term if out is None else (out - term if r % 2 else out + term)
    return out.astype(m.dtype, copy=False)


def _fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    return (a * b + c).astype(a.dtype)


def _unary(spelling: str, typing: Callable, impl: Callable) -> OpInfo:
    return OpInfo(spelling, 1, "unary", UNARY, UNARY, UNARY, False, typing, impl)


def _binary(
    spelling: str, level: int, lhs: int, rhs: int, typing: Callable, impl: Callable, chain=False
) -> OpInfo:
    return OpInfo(spelling, 2, "binary", level, lhs, rhs, chain, typing, impl)


def _builtin(
    spelling: str,
    arity: int,
    typing: Callable,
    impl: Callable,
    approximate=False,
    subgroup=False,
    operands: tuple[str | Type, ...] | None = None,
    generic: bool = True,
) -> OpInfo:
    return OpInfo(
        spelling, arity, "builtin", PRIMARY, LOGIC, LOGIC, False, typing, impl, approximate,
        subgroup=subgroup, operands=operands, generic=generic,
    )  # fmt: skip


def _approx(spelling: str, arity: int, impl: Callable, typing: Callable = _float) -> OpInfo:
    """A float builtin WGSL states an accuracy for (ULP, or inherited from a formula)."""
    return _builtin(spelling, arity, typing, _float_fn(impl) if arity == 1 else impl, True)


def _fixed_builtin(
    spelling: str, want: tuple[Type, ...], result: Type, impl: Callable, approximate=False
) -> OpInfo:
    """A builtin of fixed argument types (:func:`_fixed`), its operands those types."""
    return _builtin(spelling, len(want), _fixed(want, result), impl, approximate, operands=want)


_V4I, _V4U, _V4F, _V2F = Vec(4, i32), Vec(4, u32), Vec(4, f32), Vec(2, f32)


TABLE: dict[Op, OpInfo] = {
    Op.NEG: _unary("-", _neg, _neg_impl),
    Op.NOT: _unary("!", _logic, np.logical_not),
    Op.BITNOT: _unary("~", _int, np.invert),
    Op.MUL: _binary("*", MUL, MUL, UNARY, _product, _mat_mul),
    Op.DIV: _binary("/", MUL, MUL, UNARY, _arith, _div),
    Op.MOD: _binary("%", MUL, MUL, UNARY, _arith, _mod),
    Op.ADD: _binary("+", ADD, ADD, MUL, _sum, _wrap(np.add)),
    Op.SUB: _binary("-", ADD, ADD, MUL, _sum, _wrap(np.subtract)),
    Op.SHL: _binary("<<", SHIFT, UNARY, UNARY, _shift, _shift_impl(np.left_shift)),
    Op.SHR: _binary(">>", SHIFT, UNARY, UNARY, _shift, _shift_impl(np.right_shift)),
    Op.LT: _binary("<", REL, SHIFT, SHIFT, _order, np.less),
    Op.LE: _binary("<=", REL, SHIFT, SHIFT, _order, np.less_equal),
    Op.GT: _binary(">", REL, SHIFT, SHIFT, _order, np.greater),
    Op.GE: _binary(">=", REL, SHIFT, SHIFT, _order, np.greater_equal),
    Op.EQ: _binary("==", REL, SHIFT, SHIFT, _compare, np.equal),
    Op.NE: _binary("!=", REL, SHIFT, SHIFT, _compare, np.not_equal),
    Op.AND: _binary("&", BIT, UNARY, UNARY, _bitwise, np.bitwise_and, chain=True),
    Op.OR: _binary("|", BIT, UNARY, UNARY, _bitwise, np.bitwise_or, chain=True),
    Op.XOR: _binary("^", BIT, UNARY, UNARY, _int, np.bitwise_xor, chain=True),
    Op.LAND: _binary("&&", LOGIC, REL, REL, _logic, np.logical_and, chain=True),
    Op.LOR: _binary("||", LOGIC, REL, REL, _logic, np.logical_or, chain=True),
    Op.MIN: _builtin("min", 2, _numeric, np.minimum),
    Op.MAX: _builtin("max", 2, _numeric, np.maximum),
    Op.CLAMP: _builtin("clamp", 3, _numeric, _clamp),
    Op.SELECT: _builtin("select", 3, _select, _select_impl),
    Op.ABS: _builtin("abs", 1, _numeric, _abs_impl),
    Op.ROUND: _builtin("round", 1, _float, _float_fn(np.rint)),  # ties to even
    Op.FLOOR: _builtin("floor", 1, _float, _float_fn(np.floor)),
    Op.CEIL: _builtin("ceil", 1, _float, _float_fn(np.ceil)),
    Op.TRUNC: _builtin("trunc", 1, _float, _float_fn(np.trunc)),
    Op.SQRT: _builtin("sqrt", 1, _float, _float_fn(np.sqrt), approximate=True),
    Op.INVERSE_SQRT: _builtin(
        "inverseSqrt", 1, _float, _float_fn(lambda x: 1 / np.sqrt(x)), approximate=True
    ),
    Op.EXP: _builtin("exp", 1, _float, _float_fn(np.exp), approximate=True),
    Op.LOG: _builtin("log", 1, _float, _float_fn(np.log), approximate=True),
    Op.COS: _builtin("cos", 1, _float, _float_fn(np.cos), approximate=True),
    Op.SIN: _builtin("sin", 1, _float, _float_fn(np.sin), approximate=True),
    Op.DOT: _builtin("dot", 2, _dot, _dot_impl, approximate=True),
    Op.FMA: _builtin("fma", 3, _float, _fma, approximate=True),
    Op.SUBGROUP_SHUFFLE_XOR: _builtin(
        "subgroupShuffleXor", 2, _subgroup_lane("mask"), _needs_grid, subgroup=True
    ),
    # f16 values carried in u32 words (no ``enable f16;``): two halves per word, lane 0 low.
    Op.PACK2X16FLOAT: _builtin("pack2x16float", 1, _pack2x16, _pack2x16float),
    Op.UNPACK2X16FLOAT: _builtin("unpack2x16float", 1, _unpack2x16, _unpack2x16float),
    Op.POW: _approx("pow", 2, lib.power),
    Op.SIGN: _builtin("sign", 1, _signed, lib.sign),
    Op.FRACT: _builtin("fract", 1, _float, lib.fract),
    Op.STEP: _builtin("step", 2, _float, lib.step),
    Op.SMOOTHSTEP: _approx("smoothstep", 3, lib.smoothstep),
    Op.MIX: _builtin("mix", 3, _mix, lib.mix, True, operands=("T", "T", "T")),
    Op.SATURATE: _builtin("saturate", 1, _float, lib.saturate),
    Op.DEGREES: _approx("degrees", 1, lib.degrees),
    Op.RADIANS: _approx("radians", 1, lib.radians),
    Op.LDEXP: _builtin("ldexp", 2, _ldexp, lib.ldexp, operands=("T", "I")),
    Op.QUANTIZE_TO_F16: _builtin("quantizeToF16", 1, _fixed((f32,), f32), lib.quantize_to_f16),
    Op.EXP2: _approx("exp2", 1, np.exp2),
    Op.LOG2: _approx("log2", 1, np.log2),
    Op.TAN: _approx("tan", 1, np.tan),
    Op.ASIN: _approx("asin", 1, np.arcsin),
    Op.ACOS: _approx("acos", 1, np.arccos),
    Op.ATAN: _approx("atan", 1, np.arctan),
    Op.ATAN2: _approx("atan2", 2, lib.atan2),
    Op.SINH: _approx("sinh", 1, np.sinh),
    Op.COSH: _approx("cosh", 1, np.cosh),
    Op.TANH: _approx("tanh", 1, np.tanh),
    Op.ASINH: _approx("asinh", 1, np.arcsinh),
    Op.ACOSH: _approx("acosh", 1, np.arccosh),
    Op.ATANH: _approx("atanh", 1, np.arctanh),
    Op.LENGTH: _builtin("length", 1, _float_elem, lib.length, True, generic=False),
    Op.DISTANCE: _builtin("distance", 2, _float_elem, lib.distance, True, generic=False),
    Op.NORMALIZE: _builtin("normalize", 1, _float_vec, lib.normalize, True),
    Op.CROSS: _builtin("cross", 2, _cross, lib.cross, True),
    Op.REFLECT: _builtin("reflect", 2, _float_vec, lib.reflect, True),
    Op.REFRACT: _builtin("refract", 3, _refract, lib.refract, True, operands=("T", "T", f32)),
    Op.FACE_FORWARD: _builtin("faceForward", 3, _float_vec, lib.face_forward, True),
    Op.ALL: _builtin("all", 1, _bool_vec, lib.all_, generic=False),
    Op.ANY: _builtin("any", 1, _bool_vec, lib.any_, generic=False),
    Op.COUNT_ONE_BITS: _builtin("countOneBits", 1, _int, lib.count_one_bits),
    Op.COUNT_LEADING_ZEROS: _builtin("countLeadingZeros", 1, _int, lib.count_leading_zeros),
    Op.COUNT_TRAILING_ZEROS: _builtin("countTrailingZeros", 1, _int, lib.count_trailing_zeros),
    Op.FIRST_LEADING_BIT: _builtin("firstLeadingBit", 1, _int, lib.first_leading_bit),
    Op.FIRST_TRAILING_BIT: _builtin("firstTrailingBit", 1, _int, lib.first_trailing_bit),
    Op.REVERSE_BITS: _builtin("reverseBits", 1, _int, lib.reverse_bits),
    Op.EXTRACT_BITS: _builtin(
        "extractBits", 3, _extract, lib.extract_bits, operands=("T", u32, u32)
    ),
    Op.INSERT_BITS: _builtin(
        "insertBits", 4, _insert, lib.insert_bits, operands=("T", "T", u32, u32)
    ),
    # WGSL's packed_4x8_integer_dot_product language feature; byte 0 is the lowest.
    Op.DOT4I8PACKED: _fixed_builtin(
        "dot4I8Packed",
        (
            u32,
            u32,
        ),
        i32,
        lib.dot4_i8_packed,
    ),
    Op.DOT4U8PACKED: _fixed_builtin(
        "dot4U8Packed",
        (
            u32,
            u32,
        ),
        u32,
        lib.dot4_u8_packed,
    ),
    Op.PACK4XI8: _fixed_builtin("pack4xI8", (_V4I,), u32, lib.pack4x_i8),
    Op.PACK4XU8: _fixed_builtin("pack4xU8", (_V4U,), u32, lib.pack4x_u8),
    Op.PACK4XI8CLAMP: _fixed_builtin("pack4xI8Clamp", (_V4I,), u32, lib.pack4x_i8_clamp),
    Op.PACK4XU8CLAMP: _fixed_builtin("pack4xU8Clamp", (_V4U,), u32, lib.pack4x_u8_clamp),
    Op.UNPACK4XI8: _fixed_builtin("unpack4xI8", (u32,), _V4I, lib.unpack4x_i8),
    Op.UNPACK4XU8: _fixed_builtin("unpack4xU8", (u32,), _V4U, lib.unpack4x_u8),
    Op.PACK4X8SNORM: _fixed_builtin("pack4x8snorm", (_V4F,), u32, lib.pack4x8snorm),
    Op.PACK4X8UNORM: _fixed_builtin("pack4x8unorm", (_V4F,), u32, lib.pack4x8unorm),
    Op.PACK2X16SNORM: _fixed_builtin("pack2x16snorm", (_V2F,), u32, lib.pack2x16snorm),
    Op.PACK2X16UNORM: _fixed_builtin("pack2x16unorm", (_V2F,), u32, lib.pack2x16unorm),
    Op.UNPACK4X8SNORM: _fixed_builtin("unpack4x8snorm", (u32,), _V4F, lib.unpack4x8snorm, True),
    Op.UNPACK4X8UNORM: _fixed_builtin("unpack4x8unorm", (u32,), _V4F, lib.unpack4x8unorm, True),
    Op.UNPACK2X16SNORM: _fixed_builtin("unpack2x16snorm", (u32,), _V2F, lib.unpack2x16snorm, True),
    Op.UNPACK2X16UNORM: _fixed_builtin("unpack2x16unorm", (u32,), _V2F, lib.unpack2x16unorm, True),
    Op.TRANSPOSE: _builtin("transpose", 1, _transpose, _transpose_impl, generic=False),
    Op.DETERMINANT: _builtin(
        "determinant", 1, _determinant, _determinant_impl, approximate=True, generic=False
    ),
    Op.FREXP: _builtin("frexp", 1, _result_of("frexp"), lib.frexp, generic=False),
    Op.MODF: _builtin("modf", 1, _result_of("modf"), lib.modf, generic=False),
}


def _subgroup(spelling: str, arity: int, typing: Callable, **kw) -> OpInfo:
    return _builtin(spelling, arity, typing, _needs_grid, subgroup=True, **kw)


_SG_NUMERIC = _subgroup_value("a numeric", _IS_NUMERIC)
_SG_INT = _subgroup_value("an integer", _IS_INT)
TABLE.update(
    {
        Op.SUBGROUP_ADD: _subgroup("subgroupAdd", 1, _SG_NUMERIC, approximate=True),
        Op.SUBGROUP_MUL: _subgroup("subgroupMul", 1, _SG_NUMERIC, approximate=True),
        Op.SUBGROUP_MIN: _subgroup("subgroupMin", 1, _SG_NUMERIC),
        Op.SUBGROUP_MAX: _subgroup("subgroupMax", 1, _SG_NUMERIC),
        Op.SUBGROUP_AND: _subgroup("subgroupAnd", 1, _SG_INT),
        Op.SUBGROUP_OR: _subgroup("subgroupOr", 1, _SG_INT),
        Op.SUBGROUP_XOR: _subgroup("subgroupXor", 1, _SG_INT),
        Op.SUBGROUP_EXCLUSIVE_ADD: _subgroup(
            "subgroupExclusiveAdd", 1, _SG_NUMERIC, approximate=True
        ),
        Op.SUBGROUP_INCLUSIVE_ADD: _subgroup(
            "subgroupInclusiveAdd", 1, _SG_NUMERIC, approximate=True
        ),
        Op.SUBGROUP_EXCLUSIVE_MUL: _subgroup(
            "subgroupExclusiveMul", 1, _SG_NUMERIC, approximate=True
        ),
        Op.SUBGROUP_INCLUSIVE_MUL: _subgroup(
            "subgroupInclusiveMul", 1, _SG_NUMERIC, approximate=True
        ),
        Op.SUBGROUP_BROADCAST: _subgroup(
            "subgroupBroadcast", 2, _subgroup_lane("lane"), operands=("T", u32)
        ),
        Op.SUBGROUP_BROADCAST_FIRST: _subgroup("subgroupBroadcastFirst", 1, _SG_NUMERIC),
        Op.SUBGROUP_SHUFFLE: _subgroup(
            "subgroupShuffle", 2, _subgroup_lane("lane"), operands=("T", u32)
        ),
        Op.SUBGROUP_SHUFFLE_UP: _subgroup(
            "subgroupShuffleUp", 2, _subgroup_lane("delta"), operands=("T", u32)
        ),
        Op.SUBGROUP_SHUFFLE_DOWN: _subgroup(
            "subgroupShuffleDown", 2, _subgroup_lane("delta"), operands=("T", u32)
        ),
        Op.SUBGROUP_BALLOT: _subgroup(
            "subgroupBallot", 1, _subgroup_bool(Vec(4, u32)), operands=(bool_,), generic=False
        ),
        Op.SUBGROUP_ALL: _subgroup(
            "subgroupAll", 1, _subgroup_bool(bool_), operands=(bool_,), generic=False
        ),
        Op.SUBGROUP_ANY: _subgroup(
            "subgroupAny", 1, _subgroup_bool(bool_), operands=(bool_,), generic=False
        ),
        Op.SUBGROUP_ELECT: _subgroup("subgroupElect", 0, _subgroup_elect, operands=()),
    }
)
#: Subgroup builtins whose second argument WGSL requires to be uniform (a mask, a delta, the
#: lane read by every invocation).
SUBGROUP_UNIFORM_ARG = frozenset(
    {
        Op.SUBGROUP_SHUFFLE_XOR,
        Op.SUBGROUP_SHUFFLE_UP,
        Op.SUBGROUP_SHUFFLE_DOWN,
        Op.SUBGROUP_BROADCAST,
    }
)

UNARY_OPS = frozenset(op for op, info in TABLE.items() if info.kind == "unary")
BINARY_OPS = frozenset(op for op, info in TABLE.items() if info.kind == "binary")
BUILTINS = frozenset(op for op, info in TABLE.items() if info.kind == "builtin")
SUBGROUP_OPS = frozenset(op for op, info in TABLE.items() if info.subgroup)
COMPARISONS = frozenset({Op.LT, Op.LE, Op.GT, Op.GE, Op.EQ, Op.NE})
# Binary ops WGSL has no compound assignment for (``a < = b`` and ``a &&= b`` do not exist).
NO_COMPOUND = COMPARISONS | {Op.LAND, Op.LOR}
BY_SPELLING = {
    (info.kind == "builtin", info.arity, info.spelling): op for op, info in TABLE.items()
}


def info(op: Op) -> OpInfo:
    """The table row of ``op``."""
    return op._row


# Each member carries its row: an attribute read is cheaper than hashing an Enum member (or
# reading its ``value`` property) on the compiler's hot path.
for _op, _row in TABLE.items():
    _op._row = _row
del _op, _row


def builtin_named(name: str) -> Op | None:
    """The builtin function spelled ``name`` in WGSL, or None."""
    for op in BUILTINS:
        if TABLE[op].spelling == name:
            return op
    return None
