"""Conformance cases of the float operators and builtins: f32 and f16 comparisons with NaN and
signed zeros, arithmetic that overflows or rounds, remainder, round/floor/ceil/trunc, min/max/clamp,
select, f16 vectors, and the approximate builtins (sqrt, inverseSqrt, exp, log, cos, sin, fma)."""

from __future__ import annotations

import math

from tests.helpers.conformance_cases import Group, INF, NAN, binary_group, fn_, rows
from kvdsl.ir import Op, call, clamp, construct, f16, f32, max_, min_, round_, select, vec

#: round() of halves, in either width: to the even neighbour, the sign kept.
TIES = (((0.5,), 0.0), ((1.5,), 2.0), ((2.5,), 2.0), ((-0.5,), -0.0), ((-2.5,), -2.0))

GROUPS = [
    Group(
        "f32_lt",
        lambda a, b: a < b,
        (f32, f32),
        rows(((NAN, 1.0), 0), ((1.0, NAN), 0), ((-0.0, 0.0), 0), ((-INF, INF), 1), ((1.0, 2.0), 1)),
    ),
    Group(
        "f32_le",
        lambda a, b: a <= b,
        (f32, f32),
        rows(((NAN, NAN), 0), ((-0.0, 0.0), 1), ((INF, INF), 1)),
    ),
    Group(
        "f32_eq",
        lambda a, b: a.eq(b),
        (f32, f32),
        rows(((NAN, NAN), 0), ((-0.0, 0.0), 1), ((1.0, 1.0), 1), ((INF, INF), 1)),
    ),
    Group(
        "f32_ne",
        lambda a, b: a.ne(b),
        (f32, f32),
        rows(((NAN, NAN), 1), ((NAN, 1.0), 1), ((-0.0, 0.0), 0), ((1.0, 2.0), 1)),
    ),
    binary_group(
        f32,
        Op.ADD,
        rows(
            ((1.0, 2.0**-24), 1.0),
            ((1.0, 2.0**-23), 1.0 + 2.0**-23),
            ((3.4e38, 3.4e38), INF),
            ((INF, -INF), NAN),
            ((-0.0, -0.0), -0.0),
            ((-0.0, 0.0), 0.0),
            ((0.1, 0.2), None),
            ((1.0, 3 * 2.0**-24), 1.0 + 2.0**-22),
        ),
    ),
    binary_group(
        f32,
        Op.SUB,
        rows(((1.0, 1.0), 0.0), ((INF, INF), NAN), ((0.0, 0.0), 0.0), ((-1e38, 3e38), -INF)),
    ),
    binary_group(
        f32,
        Op.MUL,
        rows(
            ((1e30, 1e30), INF),
            ((-1e30, 1e30), -INF),
            ((0.0, INF), NAN),
            ((-0.0, 5.0), -0.0),
            ((1.1, 1.1), None),
            ((3.0, 1.0 / 3.0), None),
        ),
    ),
    binary_group(
        f32,
        Op.DIV,
        rows(
            ((1.0, 0.0), INF),
            ((-1.0, 0.0), -INF),
            ((0.0, 0.0), NAN),
            ((1.0, 3.0), None),
            ((7.0, 2.0), 3.5),
            ((-1.0, INF), -0.0),
            ((2.0, 3.0), None),
        ),
    ),
    binary_group(
        f32,
        Op.MOD,
        rows(
            ((5.5, 2.0), 1.5),
            ((-5.5, 2.0), -1.5),
            ((5.5, -2.0), 1.5),
            ((1.0, 0.0), NAN),
            ((INF, 1.0), NAN),
            ((0.0, 1.0), 0.0),
        ),
    ),
    Group(
        "f32_neg_abs",
        lambda a: -call(Op.ABS, a),
        (f32,),
        rows(((-0.0,), -0.0), ((0.0,), -0.0), ((-INF,), -INF), ((3.5,), -3.5)),
    ),
    Group(
        "f32_round",
        round_,
        (f32,),
        rows(
            *TIES,
            ((-1.5,), -2.0),
            ((0.49999997,), 0.0),
            ((3.7,), 4.0),
            ((-3.7,), -4.0),
            ((8388609.0,), 8388609.0),
            ((INF,), INF),
            ((-INF,), -INF),
            ((NAN,), NAN),
            ((4.5,), 4.0),
            ((5.5,), 6.0),
        ),
    ),
    Group(
        "f32_floor",
        fn_(Op.FLOOR),
        (f32,),
        rows(
            ((-0.5,), -1.0),
            ((0.5,), 0.0),
            ((-0.0,), -0.0),
            ((-1.0,), -1.0),
            ((2.9,), 2.0),
            ((INF,), INF),
        ),
    ),
    Group(
        "f32_ceil",
        fn_(Op.CEIL),
        (f32,),
        rows(((-0.5,), -0.0), ((0.5,), 1.0), ((-1.0,), -1.0), ((2.1,), 3.0), ((-INF,), -INF)),
    ),
    Group(
        "f32_trunc",
        fn_(Op.TRUNC),
        (f32,),
        rows(((-0.5,), -0.0), ((2.9,), 2.0), ((-2.9,), -2.0), ((1e10,), 1e10)),
    ),
    Group(
        "f32_minmax",
        lambda a, b: min_(a, b) + max_(a, b) * 2.0,
        (f32, f32),
        rows(((1.0, 2.0), 5.0), ((-INF, INF), NAN), ((-1.0, -2.0), -4.0), ((-0.0, 3.0), 6.0)),
    ),
    Group(
        "f32_clamp",
        lambda a, b: clamp(a, b, 10.0),
        (f32, f32),
        rows(
            ((-20.0, -5.0), -5.0),
            ((20.0, -5.0), 10.0),
            ((3.0, -5.0), 3.0),
            ((INF, 0.0), 10.0),
            ((-INF, 0.0), 0.0),
        ),
    ),
    Group(
        "f32_select",
        lambda a, b: select(a, b, a < b),
        (f32, f32),
        rows(((1.0, 2.0), 2.0), ((2.0, 1.0), 2.0), ((NAN, 1.0), NAN), ((-0.0, 0.0), -0.0)),
    ),
    binary_group(
        f16,
        Op.ADD,
        rows(
            ((65504.0, 16.0), INF),
            ((65504.0, 15.0), 65504.0),
            ((1.0, 2.0**-11), 1.0),
            ((1.0, 2.0**-10), 1.0 + 2.0**-10),
            ((0.1, 0.2), None),
            ((-0.0, -0.0), -0.0),
        ),
    ),
    binary_group(
        f16,
        Op.MUL,
        rows(((256.0, 256.0), INF), ((1.5, 1.5), 2.25), ((0.1, 0.1), None), ((-2.0, 0.0), -0.0)),
    ),
    binary_group(
        f16,
        Op.DIV,
        rows(((1.0, 3.0), None), ((1.0, 0.0), INF), ((0.0, 0.0), NAN), ((7.0, 2.0), 3.5)),
    ),
    Group(
        "f16_round",
        round_,
        (f16,),
        rows(*TIES, ((1023.5,), 1024.0)),
    ),
    Group(
        "f16_floor_clamp",
        lambda a: clamp(call(Op.FLOOR, a), -8.0, 7.0),
        (f16,),
        rows(((-0.5,), -1.0), ((100.0,), 7.0), ((-100.0,), -8.0), ((3.9,), 3.0)),
    ),
    Group(
        "vec2_f16_select",
        lambda a, b: select(construct(vec(2, f16), a, b), construct(vec(2, f16), b, a), a < b).x
        * 2.0,
        (f16, f16),
        rows(((1.0, 2.0), 4.0), ((3.0, -1.0), 6.0), ((65504.0, 1.0), INF)),
    ),
    Group(
        "f32_sqrt",
        fn_(Op.SQRT),
        (f32,),
        rows(((2.0,), math.sqrt(2)), ((0.25,), 0.5), ((1e30,), 1e15), ((INF,), INF)),
        approx=True,
    ),
    Group(
        "f32_inverse_sqrt",
        fn_(Op.INVERSE_SQRT),
        (f32,),
        rows(((4.0,), 0.5), ((2.0,), 1 / math.sqrt(2)), ((1e-20,), 1e10)),
        approx=True,
    ),
    Group(
        "f32_exp_log",
        lambda a: call(Op.EXP, a) + call(Op.LOG, a),
        (f32,),
        rows(
            ((1.0,), math.e),
            ((0.5,), math.exp(0.5) + math.log(0.5)),
            ((3.0,), math.exp(3) + math.log(3)),
        ),
        approx=True,
    ),
    Group(
        "f32_cos_sin",
        lambda a: call(Op.COS, a) * 3.0 + call(Op.SIN, a),
        (f32,),
        rows(
            ((0.0,), 3.0),
            ((1.0,), 3 * math.cos(1) + math.sin(1)),
            ((-3.0,), 3 * math.cos(-3) + math.sin(-3)),
            ((3.14159265,), -3.0),
        ),
        approx=True,
    ),
    Group(
        "f32_fma",
        lambda a, b: call(Op.FMA, a, b, a),
        (f32, f32),
        rows(((1.5, 2.0), 4.5), ((0.1, 10.0), None)),
        approx=True,
    ),
]
