"""Conformance cases of WGSL's numeric, bit and packing library (``kvdsl/ir/library.py``): bit
counts and scans, field extraction and insertion past the word's end, the 4x8 packed integer
dot products, packing with wrap and clamp, normalised packing and unpacking, the exact float
builtins (sign, fract, step, saturate, ldexp, quantizeToF16) and the approximate ones."""

from __future__ import annotations

from tests.helpers.conformance_cases import Group, INF, MAX, MIN, UMAX, fn_, rows
from kvdsl.ir import Op, bool_, call, construct, f32, i32, ops, u32, vec

V4I, V4U, V4F, V2F = vec(4, i32), vec(4, u32), vec(4, f32), vec(2, f32)


def _u(op: Op) -> Group:
    return fn_(op)


def _approx(op: Op, *cases) -> Group:
    """The approximate builtin ``op`` of f32 arguments, named and taking as many of them as the
    op table says, over ``cases`` (as :func:`rows` takes them)."""
    spec = ops.info(op)
    return Group(spec.spelling, _u(op), (f32,) * spec.arity, rows(*cases), approx=True)


def _of(op: Op, ty, component: str):
    """``op`` of a vector built from scalar arguments, or one component of ``op``'s vector."""
    if ty is None:
        return lambda w: getattr(call(op, w), component)
    return lambda *a: call(op, construct(ty, *a))


GROUPS = [
    Group(
        "countOneBits",
        _u(Op.COUNT_ONE_BITS),
        (u32,),
        rows(((0,), 0), ((UMAX,), 32), ((0x80000001,), 2), ((0xF0F0,), 8)),
    ),
    Group("countOneBits_i32", _u(Op.COUNT_ONE_BITS), (i32,), rows(((-1,), 32), ((MIN,), 1))),
    Group(
        "countLeadingZeros",
        _u(Op.COUNT_LEADING_ZEROS),
        (u32,),
        rows(((0,), 32), ((1,), 31), ((0x80000000,), 0), ((0x00010000,), 15)),
    ),
    Group(
        "countTrailingZeros",
        _u(Op.COUNT_TRAILING_ZEROS),
        (u32,),
        rows(((0,), 32), ((1,), 0), ((0x80000000,), 31), ((0x00000F00,), 8)),
    ),
    Group(
        "firstLeadingBit",
        _u(Op.FIRST_LEADING_BIT),
        (u32,),
        rows(((0,), UMAX), ((1,), 0), ((0x80000000,), 31), ((0x1234,), 12)),
    ),
    Group(
        "firstLeadingBit_i32",
        _u(Op.FIRST_LEADING_BIT),
        (i32,),
        rows(
            ((0,), -1), ((-1,), -1), ((1,), 0), ((-2,), 0), ((MIN,), 30), ((MAX,), 30),
            ((-256,), 7),
        ),  # fmt: skip
    ),
    Group(
        "firstTrailingBit",
        _u(Op.FIRST_TRAILING_BIT),
        (u32,),
        rows(((0,), UMAX), ((8,), 3), ((0x80000000,), 31)),
    ),
    Group("firstTrailingBit_i32", _u(Op.FIRST_TRAILING_BIT), (i32,), rows(((0,), -1), ((-1,), 0))),
    Group(
        "reverseBits",
        _u(Op.REVERSE_BITS),
        (u32,),
        rows(((1,), 0x80000000), ((0x80000000,), 1), ((0x12345678,), 0x1E6A2C48), ((0,), 0)),
    ),
    Group(
        "extractBits",
        _u(Op.EXTRACT_BITS),
        (u32, u32, u32),
        rows(
            ((0xABCD1234, 4, 8), 0x23),
            ((0xABCD1234, 0, 32), 0xABCD1234),
            ((0xABCD1234, 28, 8), 0xA),
            ((0xABCD1234, 40, 4), 0),
            ((0xABCD1234, 4, 0), 0),
        ),
    ),
    Group(
        "extractBits_i32",
        _u(Op.EXTRACT_BITS),
        (i32, u32, u32),
        rows(
            ((240, 4, 4), -1),
            ((240, 4, 5), 15),
            ((MIN, 31, 1), -1),
            ((-1, 0, 32), -1),
            ((0x70, 4, 0), 0),
            ((0x70, 30, 9), 0),
        ),
    ),
    Group(
        "insertBits",
        _u(Op.INSERT_BITS),
        (u32, u32, u32, u32),
        rows(
            ((0, 0xFF, 4, 4), 0xF0),
            ((UMAX, 0, 8, 8), 0xFFFF00FF),
            ((0x12345678, 0xABCDEF01, 0, 32), 0xABCDEF01),
            ((1, 1, 40, 2), 1),
            ((0, 3, 30, 5), 0xC0000000),
        ),
    ),
    Group(
        "insertBits_i32",
        _u(Op.INSERT_BITS),
        (i32, i32, u32, u32),
        rows(((0, -1, 31, 1), MIN), ((-1, 0, 0, 16), -65536)),
    ),
    Group(
        "dot4I8Packed",
        _u(Op.DOT4I8PACKED),
        (u32, u32),
        rows(
            ((0x01020304, 0x01010101), 10),
            ((UMAX, UMAX), 4),
            ((0x80808080, 0x80808080), 65536),
            ((0x7F80, 0x0101), -1),
        ),
    ),
    Group(
        "dot4U8Packed",
        _u(Op.DOT4U8PACKED),
        (u32, u32),
        rows(((UMAX, UMAX), 260100), ((0x01020304, 0x04030201), 20)),
    ),
    Group(
        "pack4xI8",
        _of(Op.PACK4XI8, V4I, ""),
        (i32,) * 4,
        rows(((1, -1, 127, -128), 0x807FFF01), ((256, 257, -129, 0), 0x007F0100)),
    ),
    Group(
        "pack4xI8Clamp",
        _of(Op.PACK4XI8CLAMP, V4I, ""),
        (i32,) * 4,
        rows(((1000, -1000, 5, -5), 0xFB05807F), ((MIN, MAX, 0, -1), 0xFF007F80)),
    ),
    Group("pack4xU8", _of(Op.PACK4XU8, V4U, ""), (u32,) * 4, rows(((1, 2, 3, 0x1FF), 0xFF030201))),
    Group(
        "pack4xU8Clamp",
        _of(Op.PACK4XU8CLAMP, V4U, ""),
        (u32,) * 4,
        rows(((300, 255, 0, 7), 0x0700FFFF), ((UMAX, 1, 2, 3), 0x030201FF)),
    ),
    Group(
        "unpack4xI8_x",
        _of(Op.UNPACK4XI8, None, "x"),
        (u32,),
        rows(((0xFF,), -1), ((0x7F,), 127), ((0x12345680,), -128)),
    ),
    Group(
        "unpack4xI8_w",
        _of(Op.UNPACK4XI8, None, "w"),
        (u32,),
        rows(((0x80000000,), -128), ((0x7F000000,), 127)),
    ),
    Group("unpack4xU8_y", _of(Op.UNPACK4XU8, None, "y"), (u32,), rows(((0xFF00,), 255))),
    Group(
        "pack4x8snorm",
        _of(Op.PACK4X8SNORM, V4F, ""),
        (f32,) * 4,
        rows(((1.0, -1.0, 0.0, 0.5), 0x4000817F), ((2.0, -2.0, 0.1, -0.1), None)),
    ),
    Group(
        "pack4x8unorm",
        _of(Op.PACK4X8UNORM, V4F, ""),
        (f32,) * 4,
        rows(((1.0, 0.0, 0.5, 2.0), 0xFF8000FF), ((0.3, -1.0, 0.7, 0.999), None)),
    ),
    Group(
        "pack2x16snorm",
        _of(Op.PACK2X16SNORM, V2F, ""),
        (f32,) * 2,
        rows(((1.0, -1.0), 0x80017FFF), ((0.3, -0.7), None)),
    ),
    Group(
        "pack2x16unorm",
        _of(Op.PACK2X16UNORM, V2F, ""),
        (f32,) * 2,
        rows(((1.0, 0.25), 0x4000FFFF), ((0.3, 0.7), None)),
    ),
    Group(
        "unpack4x8snorm_x",
        _of(Op.UNPACK4X8SNORM, None, "x"),
        (u32,),
        rows(((0x81,), -1.0), ((0x80,), -1.0), ((0x7F,), 1.0), ((0x40,), None)),
        approx=True,
    ),
    Group(
        "unpack4x8unorm_z",
        _of(Op.UNPACK4X8UNORM, None, "z"),
        (u32,),
        rows(((0xFF0000,), 1.0), ((0,), 0.0), ((0x800000,), None)),
        approx=True,
    ),
    Group(
        "unpack2x16snorm_y",
        _of(Op.UNPACK2X16SNORM, None, "y"),
        (u32,),
        rows(((0x80000000,), -1.0), ((0x7FFF0000,), 1.0), ((0x12340000,), None)),
        approx=True,
    ),
    Group(
        "unpack2x16unorm_x",
        _of(Op.UNPACK2X16UNORM, None, "x"),
        (u32,),
        rows(((0xFFFF,), 1.0), ((0x1234,), None)),
        approx=True,
    ),
    Group(
        "sign_f32",
        _u(Op.SIGN),
        (f32,),
        rows(((-2.5,), -1.0), ((3.0,), 1.0), ((0.0,), 0.0), ((-INF,), -1.0), ((1e-40,), 1.0)),
    ),
    Group("sign_i32", _u(Op.SIGN), (i32,), rows(((-7,), -1), ((0,), 0), ((MIN,), -1), ((5,), 1))),
    Group(
        "fract",
        _u(Op.FRACT),
        (f32,),
        rows(((1.25,), 0.25), ((-1.25,), 0.75), ((3.0,), 0.0), ((-0.1,), None)),
    ),
    Group(
        "step",
        _u(Op.STEP),
        (f32, f32),
        rows(((0.5, 0.5), 1.0), ((0.5, 0.4), 0.0), ((-INF, 0.0), 1.0)),
    ),
    Group(
        "saturate",
        _u(Op.SATURATE),
        (f32,),
        rows(((-1.0,), 0.0), ((2.0,), 1.0), ((0.3,), 0.3), ((INF,), 1.0)),
    ),
    Group(
        "ldexp",
        _u(Op.LDEXP),
        (f32, i32),
        rows(((1.5, 3), 12.0), ((1.0, -1), 0.5), ((3.0, 0), 3.0), ((-0.75, 10), -768.0)),
    ),
    Group(
        "quantizeToF16",
        _u(Op.QUANTIZE_TO_F16),
        (f32,),
        rows(((1.0001,), 1.0), ((65504.0,), 65504.0), ((0.1,), 0.0999755859375), ((-2.5,), -2.5)),
    ),
    Group(
        "all",
        lambda a, b: call(Op.ALL, construct(vec(2, bool_), a > 0.0, b > 0.0)),
        (f32, f32),
        rows(((1.0, 1.0), 1), ((1.0, -1.0), 0), ((-1.0, -1.0), 0)),
    ),
    Group(
        "any",
        lambda a, b: call(Op.ANY, construct(vec(2, bool_), a > 0.0, b > 0.0)),
        (f32, f32),
        rows(((1.0, -1.0), 1), ((-1.0, -1.0), 0)),
    ),
    _approx(Op.POW, ((2.0, 10.0), 1024.0), ((2.0, 0.5), 2.0**0.5), ((9.0, 0.5), 3.0), (1.7, 2.3)),
    _approx(Op.EXP2, ((3.0,), 8.0), ((-1.0,), 0.5), (0.3,)),
    _approx(Op.LOG2, ((8.0,), 3.0), ((0.25,), -2.0), (3.0,)),
    _approx(Op.TAN, ((0.0,), 0.0), (0.5,), (-1.0,)),
    _approx(Op.ASIN, ((0.0,), 0.0), (0.5,)),
    _approx(Op.ACOS, ((1.0,), 0.0), (0.5,)),
    _approx(Op.ATAN, ((0.0,), 0.0), (1.0,), (-3.0,)),
    _approx(Op.ATAN2, (1.0, 1.0), (1.0, -1.0), (-2.0, 0.5), ((0.0, 1.0), 0.0)),
    _approx(Op.SINH, ((0.0,), 0.0), (1.5,)),
    _approx(Op.COSH, ((0.0,), 1.0), (1.5,)),
    _approx(Op.TANH, ((0.0,), 0.0), (0.7,), (-2.0,)),
    _approx(Op.ASINH, ((0.0,), 0.0), (2.0,)),
    _approx(Op.ACOSH, ((1.0,), 0.0), (2.0,)),
    _approx(Op.ATANH, ((0.0,), 0.0), (0.5,)),
    _approx(Op.DEGREES, ((3.14159265,), 180.0), (1.0,)),
    _approx(Op.RADIANS, ((180.0,), 3.14159265), (1.0,)),
    _approx(Op.SMOOTHSTEP, ((0.0, 1.0, 0.5), 0.5), ((0.0, 1.0, 2.0), 1.0), (0.0, 2.0, 0.3)),
    _approx(Op.MIX, ((1.0, 3.0, 0.5), 2.0), ((1.0, 3.0, 0.0), 1.0), (-2.0, 5.0, 0.3)),
    Group(
        "mix_vec_scalar",
        lambda a, b, t: call(Op.MIX, construct(V2F, a, b), construct(V2F, b, a), t).y,
        (f32, f32, f32),
        rows(((1.0, 3.0, 0.25), 2.5), ((0.7, -1.3, 0.6), None)),
        approx=True,
    ),
    Group(
        "length",
        lambda a, b, c: call(Op.LENGTH, construct(vec(3, f32), a, b, c)),
        (f32, f32, f32),
        rows(((3.0, 4.0, 0.0), 5.0), ((1.0, 2.0, 2.0), 3.0), ((0.3, -0.7, 1.1), None)),
        approx=True,
    ),
    Group("length_scalar", _u(Op.LENGTH), (f32,), rows(((-2.5,), 2.5)), approx=True),
    Group(
        "distance",
        lambda a, b: call(Op.DISTANCE, construct(V2F, a, b), construct(V2F, b, a)),
        (f32, f32),
        rows(((1.0, 4.0), 3.0 * 2.0**0.5), ((0.3, -0.2), None)),
        approx=True,
    ),
    Group(
        "normalize",
        lambda a, b: call(Op.NORMALIZE, construct(V2F, a, b)).x,
        (f32, f32),
        rows(((3.0, 4.0), 0.6), ((-1.0, 1e-3), None)),
        approx=True,
    ),
    Group(
        "cross",
        lambda a, b: call(
            Op.CROSS, construct(vec(3, f32), a, b, 1.0), construct(vec(3, f32), b, 2.0, a)
        ).y,
        (f32, f32),
        rows(((1.0, 3.0), 2.0), ((0.5, -1.5), None)),
        approx=True,
    ),
]
