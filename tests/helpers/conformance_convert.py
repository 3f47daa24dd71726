"""Conformance cases of the conversions: float to integer saturating (and NaN), integer to
float rounding, u32 <-> i32 bit casts, to bool, f32 <-> f16 with overflow to infinity, and the
quantiser's round-clamp-convert chain."""

from __future__ import annotations

from tests.helpers.conformance_cases import Group, INF, MAX, MIN, NAN, UMAX, rows
from kvdsl.ir import (
    bool_,
    clamp,
    construct,
    convert,
    f16,
    f32,
    i32,
    pack2x16float,
    round_,
    u32,
    unpack2x16float,
    vec,
)


def _convert(source, target, cases: list) -> Group:
    """The conversion of a value of type ``source`` to type ``target``, named
    ``source_to_target``, over ``cases``."""
    return Group(f"{source}_to_{target}", lambda a: convert(target, a), (source,), cases)


GROUPS = [
    _convert(
        f32,
        i32,
        rows(
            ((2147483520.0,), 2147483520),
            ((2147483648.0,), 2147483520),
            ((3e9,), 2147483520),
            ((-3e9,), MIN),
            ((-2147483648.0,), MIN),
            ((-0.5,), 0),
            ((0.99,), 0),
            ((-1.5,), -1),
            ((INF,), 2147483520),
            ((-INF,), MIN),
            ((NAN,), 0),
            ((1e-30,), 0),
            ((16777217.0,), 16777216),
        ),
    ),
    _convert(
        f32,
        u32,
        rows(
            ((-1.5,), 0),
            ((4294967040.0,), 4294967040),
            ((4294967296.0,), 4294967040),
            ((5e9,), 4294967040),
            ((NAN,), 0),
            ((INF,), 4294967040),
            ((-INF,), 0),
            ((0.9,), 0),
            ((2147483648.0,), 2**31),
            ((123.99,), 123),
        ),
    ),
    _convert(i32, u32, rows(((-1,), UMAX), ((MIN,), 2**31), ((MAX,), MAX))),
    _convert(u32, i32, rows(((UMAX,), -1), ((2**31,), MIN), ((MAX,), MAX))),
    _convert(
        i32,
        f32,
        rows(
            ((16777217,), 16777216.0),
            ((16777219,), 16777220.0),
            ((MIN,), -2147483648.0),
            ((MAX,), 2147483648.0),
            ((-16777217,), -16777216.0),
            ((33554435,), 33554436.0),
        ),
    ),
    _convert(
        u32,
        f32,
        rows(
            ((UMAX,), 4294967296.0),
            ((16777217,), 16777216.0),
            ((0,), 0.0),
            ((2**31 + 128,), 2147483648.0),
            ((2**31 + 384,), 2147484160.0),
            ((2**31 + 128,), 2147483648.0),
        ),
    ),
    Group(
        "f32_to_bool",
        lambda a: convert(u32, convert(bool_, a)),
        (f32,),
        rows(((0.0,), 0), ((-0.0,), 0), ((NAN,), 1), ((1e-30,), 1), ((-INF,), 1)),
    ),
    Group(
        "i32_to_bool",
        lambda a: convert(i32, convert(bool_, a)),
        (i32,),
        rows(((0,), 0), ((MIN,), 1), ((-1,), 1)),
    ),
    _convert(
        f32,
        f16,
        rows(
            ((65504.0,), 65504.0),
            ((65520.0,), INF),
            ((65519.0,), 65504.0),
            ((2049.0,), 2048.0),
            ((2051.0,), 2052.0),
            ((0.1,), None),
            ((-0.0,), -0.0),
            ((1e6,), INF),
            ((NAN,), NAN),
            ((2.0**-14,), 2.0**-14),
        ),
    ),
    _convert(
        f16, f32, rows(((65504.0,), 65504.0), ((-INF,), -INF), ((0.1,), None), ((-0.0,), -0.0))
    ),
    _convert(
        f16,
        i32,
        rows(((INF,), 65504), ((-INF,), -65504), ((65504.0,), 65504), ((-2.5,), -2), ((NAN,), 0)),
    ),
    _convert(f16, u32, rows(((-1.0,), 0), ((65504.0,), 65504), ((INF,), 65504), ((1.75,), 1))),
    _convert(
        u32,
        f16,
        rows(
            ((65504,), 65504.0),
            ((2049,), 2048.0),
            ((2051,), 2052.0),
            ((3,), 3.0),
            ((65519,), 65504.0),
        ),
    ),
    _convert(i32, f16, rows(((-2049,), -2048.0), ((-65504,), -65504.0), ((1,), 1.0))),
    Group(
        "pack2x16float",
        lambda a, b: pack2x16float(construct(vec(2, f32), a, b)),
        (f32, f32),
        rows(
            ((1.0, -2.0), 0xC0003C00),  # lane 0 in the low half
            ((65504.0, 0.0), 0x00007BFF),
            ((1.0 + 2.0**-11, 0.5), 0x38003C00),  # halfway: ties to even (1.0)
            ((1.0 + 3 * 2.0**-11, -0.0), 0x80003C02),  # halfway: ties to even (up)
            ((2.0**-24, -(2.0**-14)), 0x84000001),  # the least subnormal, the least normal
            ((INF, -INF), 0xFC007C00),
            ((0.1, 3.14159), 0x42482E66),
            ((1e6, 1.0), 0x3C007C00),  # past f16's range: indeterminate (interpreter: inf)
        ),
    ),
    Group(
        "unpack2x16float_lo",
        lambda w: unpack2x16float(w).x,
        (u32,),
        rows(
            ((0x3C00C000,), -2.0),
            ((0x00007BFF,), 65504.0),
            ((0x00000001,), 2.0**-24),
            ((0x0000FC00,), -INF),
            ((0x12342E66,), 0.0999755859375),
        ),
    ),
    Group(
        "unpack2x16float_hi",
        lambda w: unpack2x16float(w).y,
        (u32,),
        rows(((0x3C00C000,), 1.0), ((0x84000000,), -(2.0**-14)), ((0x7C000000,), INF)),
    ),
    Group(
        "f32_quant",
        lambda a, b: convert(i32, clamp(round_(a / b), -8.0, 7.0)),
        (f32, f32),
        rows(
            ((2.5, 1.0), 2),
            ((-2.5, 1.0), -2),
            ((0.7, 0.1), 7),
            ((-100.0, 0.5), -8),
            ((1.0, 0.0), 7),
            ((-1.0, 0.0), -8),
            ((3.5, 1.0), 4),
        ),
    ),
]
