"""Conformance cases of the integer operators: u32/i32 arithmetic that wraps, division and
remainder by zero and of MIN by -1, shifts by the width and past it, bitwise ops, min/max/clamp,
comparisons, select, int4 packing and integer vectors."""

from __future__ import annotations

from tests.helpers.conformance_cases import Group, MAX, MIN, UMAX, binary_group, fn_, rows, unop
from kvdsl.ir import Op, clamp, construct, convert, dot, i32, max_, min_, select, u32, vec

GROUPS = [
    binary_group(
        u32,
        Op.ADD,
        rows(((UMAX, 1), 0), ((UMAX, UMAX), UMAX - 1), ((2**31, 2**31), 0), ((5, 7), 12)),
    ),
    binary_group(
        u32, Op.SUB, rows(((0, 1), UMAX), ((3, 5), UMAX - 1), ((7, 7), 0), ((0, UMAX), 1))
    ),
    binary_group(
        u32,
        Op.MUL,
        rows(
            ((2**31, 2), 0),
            ((65536, 65536), 0),
            ((UMAX, UMAX), 1),
            ((65537, 65537), 131073),
            ((3, 5), 15),
        ),
    ),
    binary_group(
        i32, Op.ADD, rows(((MAX, 1), MIN), ((MIN, -1), MAX), ((MIN, MIN), 0), ((-5, 3), -2))
    ),
    binary_group(
        i32, Op.SUB, rows(((MIN, 1), MAX), ((MAX, -1), MIN), ((0, MIN), MIN), ((-5, -7), 2))
    ),
    binary_group(
        i32,
        Op.MUL,
        rows(
            ((MIN, -1), MIN),
            ((MAX, 2), -2),
            ((65536, 65536), 0),
            ((-3, 7), -21),
            ((46341, 46341), -2147479015),
        ),
    ),
    binary_group(
        u32,
        Op.DIV,
        rows(
            ((7, 0), 7),
            ((0, 0), 0),
            ((UMAX, 0), UMAX),
            ((7, 2), 3),
            ((UMAX, UMAX), 1),
            ((UMAX, 2), 2**31 - 1),
            ((5, 9), 0),
        ),
    ),
    binary_group(
        u32,
        Op.MOD,
        rows(
            ((7, 0), 0), ((0, 0), 0), ((7, 2), 1), ((UMAX, 10), 5), ((5, 9), 5), ((UMAX, UMAX), 0)
        ),
    ),
    binary_group(
        i32,
        Op.DIV,
        rows(
            ((MIN, -1), MIN),
            ((7, 0), 7),
            ((-7, 0), -7),
            ((MIN, 0), MIN),
            ((7, 2), 3),
            ((-7, 2), -3),
            ((7, -2), -3),
            ((-7, -2), 3),
            ((MIN, 1), MIN),
            ((MIN, MIN), 1),
            ((MAX, MIN), 0),
            ((-1, 2), 0),
        ),
    ),
    binary_group(
        i32,
        Op.MOD,
        rows(
            ((MIN, -1), 0),
            ((7, 0), 0),
            ((-7, 0), 0),
            ((7, 2), 1),
            ((-7, 2), -1),
            ((7, -2), 1),
            ((-7, -2), -1),
            ((MIN, 3), -2),
            ((MAX, MIN), MAX),
            ((MIN, MAX), -1),
        ),
    ),
    binary_group(
        u32,
        Op.SHL,
        rows(
            ((1, 31), 2**31),
            ((1, 32), 1),
            ((1, 33), 2),
            ((3, 31), 2**31),
            ((UMAX, 64), UMAX),
            ((5, UMAX), 2**31),
            ((0xABCD, 16), 0xABCD0000),
        ),
    ),
    binary_group(
        u32,
        Op.SHR,
        rows(
            ((2**31, 31), 1),
            ((2**31, 32), 2**31),
            ((UMAX, 33), 2**31 - 1),
            ((UMAX, 0), UMAX),
            ((UMAX, UMAX), 1),
            ((0xABCD0000, 16), 0xABCD),
        ),
    ),
    binary_group(
        i32,
        Op.SHL,
        rows(((1, 31), MIN), ((-1, 31), MIN), ((1, 32), 1), ((-3, 33), -6), ((MAX, 1), -2)),
    ),
    binary_group(
        i32,
        Op.SHR,
        rows(
            ((-8, 1), -4),
            ((MIN, 31), -1),
            ((-1, 32), -1),
            ((MIN, 33), -(2**30)),
            ((MAX, 31), 0),
            ((-7, 1), -4),
            ((MIN, 32), MIN),
        ),
    ),
    Group(
        "u32_bits",
        lambda a, b: (a & b) ^ (a | ~b),
        (u32, u32),
        rows(
            ((0xF0F0F0F0, 0x0FF00FF0), None),
            ((UMAX, 0), None),
            ((0, 0), None),
            ((0x12345678, 0x9ABCDEF0), None),
        ),
    ),
    Group(
        "i32_bits",
        lambda a, b: (a & b) ^ (a | ~b),
        (i32, i32),
        rows(((-1, MIN), None), ((MIN, MAX), None), ((-12345, 6789), None)),
    ),
    Group(
        "i32_neg", unop(Op.NEG), (i32,), rows(((MIN,), MIN), ((MAX,), -MAX), ((0,), 0), ((-1,), 1))
    ),
    Group(
        "i32_abs", fn_(Op.ABS), (i32,), rows(((MIN,), MIN), ((-5,), 5), ((MAX,), MAX), ((0,), 0))
    ),
    Group(
        "u32_minmax",
        lambda a, b: min_(a, b) * 3 + max_(a, b),
        (u32, u32),
        rows(((UMAX, 0), UMAX), ((2**31, 2**31 - 1), None), ((7, 7), 28)),
    ),
    Group(
        "i32_minmax",
        lambda a, b: min_(a, b) - max_(a, b),
        (i32, i32),
        rows(((MIN, MAX), 1), ((-1, 1), -2), ((MAX, MIN), 1)),
    ),
    Group(
        "i32_clamp",
        lambda a, b: clamp(a, b, 10),
        (i32, i32),
        rows(((MIN, -5), -5), ((MAX, -5), 10), ((3, -5), 3), ((3, 20), 10)),
    ),
    Group(
        "u32_lt",
        lambda a, b: a < b,
        (u32, u32),
        rows(((0, UMAX), 1), ((UMAX, 0), 0), ((2**31, 2**31 - 1), 0), ((5, 5), 0)),
    ),
    Group(
        "i32_lt",
        lambda a, b: a < b,
        (i32, i32),
        rows(((MIN, MAX), 1), ((-1, 0), 1), ((0, -1), 0), ((MIN, MIN), 0)),
    ),
    Group(
        "u32_select",
        lambda a, b: select(a, b, (a & 1).eq(1)),
        (u32, u32),
        rows(((1, 9), 9), ((2, 9), 2), ((UMAX, 0), 0)),
    ),
    Group(
        "int4_pack",
        lambda a, b: (convert(u32, a + 8) & 15) | ((convert(u32, b + 8) & 15) << 4),
        (i32, i32),
        rows(((-8, 7), 0xF0), ((7, -8), 0x0F), ((0, 0), 0x88), ((-1, 1), 0x97)),
    ),
    Group(
        "vec4_dot_u32",
        lambda a, b: dot(
            construct(vec(4, u32), a, b, a * b, a - b), construct(vec(4, u32), 1, 2, 3, 4)
        ),
        (u32, u32),
        rows(((UMAX, 2), None), ((3, 5), (3 + 10 + 45 + 4 * (2**32 - 2)) % 2**32), ((0, 0), 0)),
    ),
    Group(
        "vec4_swizzle",
        lambda a, b: (
            construct(vec(4, i32), a, b, -a, a * b).member("wzx") * b
            - construct(vec(3, i32), 1, 2, 3)
        ).member("z")
        + (construct(vec(2, i32), b, a) / a).y,
        (i32, i32),
        rows(((MIN, -1), None), ((7, 0), None), ((-7, 3), None)),
    ),
]
