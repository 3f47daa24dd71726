"""Generated float kernels run on the GPU and in the interpreter: the same values out.

``tests/interp/test_exec_fuzz.py`` composes the integer part of the op table freely and asks for the
same bits. Floats round, and WGSL leaves a GPU room the interpreter does not take (a product
and a sum may fuse into one ``fma``, a division may be 2.5 ULP off, the sign of a zero may be
ignored), so a free float expression has no single right answer to compare against. These
kernels keep every value *exact* instead: each ``f32`` is a multiple of 1/16 within ±1,024 and
each ``f16`` a multiple of 1/8 within ±64, and every operation is one whose exact result is again
such a value (sums, products with small integers, ``fma`` of those, ``dot``, ``%`` and ``/`` by
powers of two, ``floor``/``ceil``/``round``/``trunc``, ``abs``, ``min``/``max``/``clamp``,
``select``, comparisons, swizzles and constructors), clamped back into range where it could
leave it, or quantised back onto the grid (``floor(e * 16) / 16``) after a division. An exact
result is what every rounding mode, a fused or split product and any accuracy WGSL allows give
alike, so GPU and interpreter must agree exactly, while the kernels still reach the float paths
the catalog's kernels take: ``f32`` and ``vec4<f32>``, ``f16``, ``vec2<f16>`` and ``vec4<f16>`` arithmetic,
``f16`` storage loads and stores, conversions between them and to and from ``i32``/``u32`` (saturating,
with values past each integer range), ``pack2x16float``/``unpack2x16float``, ``round`` on ties,
``-0.0`` among the inputs. Statements: ``let``\\ s, ``var`` assignments, compound assignments, ifs
on float comparisons and bounded loops that carry floats.

Floats are compared as values (``-0.0 == 0.0``: WGSL lets an implementation ignore a zero's
sign); packed halves likewise (a half of ``0x8000`` equals one of ``0``); integers bit for bit.
Outputs are poisoned first (NaN, ``0xDEADBEEF``), so an unwritten slot shows. The approximate
builtins (``sqrt``, ``inverseSqrt``, ``exp``, ``log``, ``cos``, ``sin``) and NaN and infinities stay
with the conformance cases (``tests/helpers/conformance_float.py``), one op at a time.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvdsl.emit import emit
from kvdsl.interp import run as interp_run
from kvdsl.ir.tree import (
    Assign,
    Binary,
    Binding,
    Call,
    Construct,
    Convert,
    For,
    If,
    Index,
    Kernel,
    Let,
    Lit,
    Member,
    Name,
    Unary,
    Var,
)
from kvdsl.ir.ops import Op
from kvdsl.ir.types import Vec, bool_, f16, f32, i32, u32
from kvdsl.frontend.abstract import canonical
from kvdsl.ir.verify import verify
from tests.helpers.exec_fuzz import fuzz_settings, kernel_of
from tests.helpers.features import suite_feature
from tests.helpers.roundtrip import Fresh, assert_round_trip

V4, V2H, V4H = Vec(4, f32), Vec(2, f16), Vec(4, f16)
WG, GROUPS = 64, 2
N = WG * GROUPS  # invocations
FSLOTS, USLOTS = 20, 10  # f32 outputs, u32 outputs per invocation
FIXED = 12  # the f32 slots the epilogue writes (the body's stores go after them)
INTS, PACKED = (0, 1, 2, 3), (4, 5)  # the epilogue's u32 slots: integers, pack2x16float words
FAR = 4194304.0  # 2^22: a value past +-512 times this is past i32's range, at 1,024 u32's
POISON = 0xDEADBEEF

#: Per scalar type: (grid: values are multiples of 1/grid, limit: |value| <= limit, small:
#: a multiplier's |value| <= small). f32: 14 bits of grid value, a product with a small integer
#: 20, a dot of four such 22: all under f32's 24. f16: 9, 10 and 11 bits, f16 holding 11.
DOMAIN = {f32: (16, 1024.0, 64), f16: (8, 64.0, 2)}
#: The names of each type every expression may read; the variable each may assign.
READ = {
    f32: [Name("a"), Name("b"), Name("c"), Name("d"), Name("fa")],
    V4: [Name("va"), Name("fv")],
    f16: [Name("h"), Name("g"), Name("fh")],
    V2H: [Name("vh"), Name("fw")],
    V4H: [Name("vx"), Name("fx")],
}
WRITE = {f32: "fa", V4: "fv", f16: "fh", V2H: "fw", V4H: "fx"}
COMPARE = (Op.LT, Op.LE, Op.GT, Op.GE, Op.EQ, Op.NE)


#: A key of the names in scope that is no type: False where no unpack2x16float of a word fixed
#: when the shader compiles may be drawn (the adapter runs it wrong: ``KNOWN_DEVIATIONS``).
FIXED_UNPACK = "fixed unpack"
#: The same for f16 values (an adapter without ``shader-f16``).
HALVES = "f16"


def scalar(ty):
    return ty.elem if isinstance(ty, Vec) else ty


def flit(value: float, ty) -> Lit:
    """A float literal as the IR holds one (the shortest decimal of the value: docs/grammar.md)."""
    return Lit(canonical(float(value), ty), ty)


def const(value: float, ty):
    """``value`` as a constant of ``ty`` (a vector's every component)."""
    lit = flit(value, scalar(ty))
    return Construct(ty, (lit,) * ty.n) if isinstance(ty, Vec) else lit


def limit(e, ty, within=None):
    """``e`` of ``ty`` clamped into ``within``'s range (``ty``'s by default)."""
    lim = DOMAIN[scalar(within or ty)][1]
    return Call(Op.CLAMP, (e, const(-lim, ty), const(lim, ty)))


def onto_grid(e, ty, how: Op, within=None):
    """``e`` of ``ty`` (exact, maybe finer than the grid) rounded by ``how`` onto ``within``'s
    grid (``ty``'s by default)."""
    grid = DOMAIN[scalar(within or ty)][0]
    return Binary(Op.DIV, Call(how, (Binary(Op.MUL, e, const(grid, ty)),)), const(grid, ty))


@st.composite
def grid_literal(draw, ty):
    grid, lim, _ = DOMAIN[scalar(ty)]
    ks = st.one_of(
        st.sampled_from([0, 1, -1, grid // 2, -grid // 2, 5 * grid // 2, int(lim * grid)]),
        st.integers(-int(lim * grid), int(lim * grid)),
    )
    if isinstance(ty, Vec):
        return Construct(ty, tuple(flit(draw(ks) / grid, ty.elem) for _ in range(ty.n)))
    return flit(draw(ks) / grid, ty)


@st.composite
def small(draw, ty, depth: int, scope: dict):
    """An integer-valued expression of ``ty`` within its type's ``small`` bound."""
    m = DOMAIN[scalar(ty)][2]
    kind = draw(st.sampled_from(["lit", "lit", "round", "int"] if depth > 0 else ["lit"]))
    if kind == "lit":
        ints = st.integers(-m, m)
        if isinstance(ty, Vec):
            return Construct(ty, tuple(flit(draw(ints), ty.elem) for _ in range(ty.n)))
        return flit(draw(ints), ty)
    if kind == "round":
        how = draw(st.sampled_from([Op.ROUND, Op.FLOOR, Op.CEIL, Op.TRUNC]))
        e = Call(how, (draw(expr(ty, depth - 1, scope)),))
        return Call(Op.CLAMP, (e, const(-m, ty), const(m, ty)))
    # From an integer input: clamp(y, -m, m) converted (a vector's every component).
    y = Convert(scalar(ty), Call(Op.CLAMP, (Name("y"), Lit(-m, i32), Lit(m, i32))))
    return Construct(ty, (y,) * ty.n) if isinstance(ty, Vec) else y


@st.composite
def condition(draw, depth: int, scope: dict):
    """A bool from comparing float expressions (or combining such comparisons)."""
    if depth > 0 and draw(st.integers(0, 3)) == 0:
        op = draw(st.sampled_from([Op.LAND, Op.LOR]))
        return Binary(op, draw(condition(depth - 1, scope)), draw(condition(depth - 1, scope)))
    ty = draw(st.sampled_from([f32, f16] if scope.get(HALVES, True) else [f32]))
    a, b = draw(expr(ty, depth, scope)), draw(expr(ty, depth, scope))
    return Binary(draw(st.sampled_from(COMPARE)), a, b)


@st.composite
def expr(draw, ty, depth: int, scope: dict | None = None):
    """An expression of ``ty`` whose every value lies on its type's grid within its limit."""
    scope = scope or {}
    names = READ[ty] + scope.get(ty, [])
    if depth <= 0 or draw(st.integers(0, 6)) == 0:
        return (
            draw(grid_literal(ty)) if draw(st.integers(0, 3)) == 0 else draw(st.sampled_from(names))
        )
    sub = lambda t=ty: expr(t, depth - 1, scope)  # noqa: E731
    halves = scope.get(HALVES, True)
    s = scalar(ty)
    kinds = ["add", "mul", "fma", "neg", "round", "abs", "minmax", "clamp", "select"]
    kinds += ["divide", "mod", "convert"]
    if isinstance(ty, Vec):
        kinds += ["construct", "swizzle", "vec_scalar"]
    else:
        kinds += ["component", "dot"]
    if ty == f32:
        kinds += ["unpack"]
    kind = draw(st.sampled_from(kinds))
    match kind:
        case "add":
            return limit(
                Binary(draw(st.sampled_from([Op.ADD, Op.SUB])), draw(sub()), draw(sub())), ty
            )
        case "mul":
            a, m = draw(sub()), draw(small(ty, depth - 1, scope))
            return limit(Binary(Op.MUL, a, m) if draw(st.booleans()) else Binary(Op.MUL, m, a), ty)
        case "fma":  # exact, so fused or not alike
            return limit(
                Call(Op.FMA, (draw(sub()), draw(small(ty, depth - 1, scope)), draw(sub()))), ty
            )
        case "neg":
            x = draw(sub())
            return Unary(Op.NEG, x if not isinstance(x, Lit) else Convert(ty, x))
        case "round":
            return Call(
                draw(st.sampled_from([Op.ROUND, Op.FLOOR, Op.CEIL, Op.TRUNC])), (draw(sub()),)
            )
        case "abs":
            return Call(Op.ABS, (draw(sub()),))
        case "minmax":
            return Call(draw(st.sampled_from([Op.MIN, Op.MAX])), (draw(sub()), draw(sub())))
        case "clamp":  # bounds in order (SPIR-V's clamp leaves low > high undefined)
            lo, hi = draw(sub()), draw(sub())
            return Call(Op.CLAMP, (draw(sub()), Call(Op.MIN, (lo, hi)), Call(Op.MAX, (lo, hi))))
        case "select":
            c = draw(condition(depth - 1, scope))
            if isinstance(ty, Vec) and draw(st.booleans()):  # a condition per component
                c = Construct(
                    Vec(ty.n, bool_), tuple(draw(condition(0, scope)) for _ in range(ty.n))
                )
            return Call(Op.SELECT, (draw(sub()), draw(sub()), c))
        case "divide":  # by a power of two (exact), then back onto the grid
            by = draw(st.sampled_from([2.0, 4.0, -2.0, 0.5, 8.0, -0.25]))
            how = draw(st.sampled_from([Op.FLOOR, Op.CEIL, Op.ROUND, Op.TRUNC]))
            return limit(onto_grid(Binary(Op.DIV, draw(sub()), const(by, ty)), ty, how), ty)
        case "mod":  # x - y * trunc(x / y), exact for a power of two y
            return Binary(
                Op.MOD, draw(sub()), const(draw(st.sampled_from([4.0, 0.5, -2.0, 1.0])), ty)
            )
        case "convert":
            if s == f32:  # from f16 (exact), or from a clamped integer
                src = draw(st.sampled_from(["f16", "i32", "u32", "bool"][1 - halves :]))
            else:  # an f32 onto f16's grid and range first
                src = "f32"
            if src == "f16":
                other = draw(st.sampled_from([V2H, V4H])) if ty == V4 else f16
                e = draw(expr(other, depth - 1, scope))
                if other == V4H:
                    return Convert(V4, e)
                if ty == V4:  # a vec2<f16> converted whole, and its components one by one
                    wide = Convert(Vec(2, f32), e)
                    x, y = (Convert(f32, Member(e, c)) for c in "xy")
                    return Construct(V4, (Member(wide, "x"), y, x, Member(wide, "y")))
                return Convert(ty, e)
            if src == "f32":
                other = V4 if isinstance(ty, Vec) else f32
                e = draw(expr(other, depth - 1, scope))
                if ty == V2H:
                    e = Member(e, draw(st.sampled_from(["xy", "zw", "wx"])))
                    other = Vec(2, f32)
                elif ty == V4H:
                    e = Member(e, draw(st.sampled_from(["xyzw", "wzyx"])))
                e = limit(onto_grid(e, other, Op.FLOOR, f16), other, f16)  # f16's, in f32
                return Convert(ty, e)
            if src == "bool":
                v = Convert(f32, draw(condition(0, scope)))
            elif src == "i32":
                v = Convert(f32, Call(Op.CLAMP, (Name("y"), Lit(-1024, i32), Lit(1024, i32))))
            else:
                v = Convert(f32, Call(Op.MIN, (Name("x"), Lit(1024, u32))))
            return Construct(ty, (v,) * ty.n) if isinstance(ty, Vec) else v
        case "construct":
            return Construct(ty, tuple(draw(sub(s)) for _ in range(ty.n)))
        case "swizzle":
            fours = ["wzyx", "xxyy", "yzwx"]
            pattern = draw(st.sampled_from(fours if ty.n == 4 else ["yx", "xx"]))
            return Member(draw(sub()), pattern)
        case "vec_scalar":
            op = draw(st.sampled_from([Op.ADD, Op.SUB, Op.MUL]))
            if op is Op.MUL:
                a, b = draw(sub()), draw(small(s, depth - 1, scope))
            else:
                a, b = draw(sub()), draw(sub(s))
            return limit(Binary(op, a, b) if draw(st.booleans()) else Binary(op, b, a), ty)
        case "component":
            vty = draw(
                st.sampled_from([V4, V2H, V4H][: 1 + 2 * halves] if s == f32 else [V2H, V4H])
            )
            e = Member(draw(expr(vty, depth - 1, scope)), draw(st.sampled_from("xy")))
            return e if scalar(vty) == ty else Convert(ty, e)
        case "dot":
            vty = V4 if ty == f32 else V2H
            v, m = draw(expr(vty, depth - 1, scope)), draw(small(vty, depth - 1, scope))
            return limit(Call(Op.DOT, (v, m)), ty)
        case "unpack":  # two f32s onto f16's grid, packed, unpacked: the same values
            v = draw(expr(V4, depth - 1, scope))
            if not scope.get(FIXED_UNPACK, True):  # a word computed at run time, lane by lane
                v = Call(Op.MAX, (v, Name("va")))  # (vec4(0.0, 0.5, a, a).xy is fixed too)
            pair = limit(onto_grid(Member(v, "xy"), Vec(2, f32), Op.ROUND, f16), Vec(2, f32), f16)
            word = Call(Op.PACK2X16FLOAT, (pair,))
            return Member(Call(Op.UNPACK2X16FLOAT, (word,)), draw(st.sampled_from("xy")))
    raise AssertionError(kind)


def f_slot(j):
    at = Binary(Op.ADD, Binary(Op.MUL, Member(Name("gid"), "x"), Lit(FSLOTS, u32)), Lit(j, u32))
    return Index(Name("out"), at)


def u_slot(j):
    at = Binary(Op.ADD, Binary(Op.MUL, Member(Name("gid"), "x"), Lit(USLOTS, u32)), Lit(j, u32))
    return Index(Name("words"), at)


def as_f32(e, ty) -> list:
    """``e`` of ``ty`` as f32 values, one a component."""
    if isinstance(ty, Vec):
        comps = [Member(e, "xyzw"[k]) for k in range(ty.n)]
        return [c if ty.elem == f32 else Convert(f32, c) for c in comps]
    return [e if ty == f32 else Convert(f32, e)]


@st.composite
def integer_result(draw, scope: dict):
    """A float made an integer: truncated, saturated past either end of the range, or compared."""
    ty = draw(st.sampled_from([f32, f16] if scope.get(HALVES, True) else [f32]))
    e = draw(expr(ty, 2, scope))
    match draw(st.sampled_from(["i32", "u32", "i32_far", "u32_far", "select"])):
        case "i32":
            return Convert(u32, Convert(i32, e))
        case "u32":  # a negative value saturates to 0
            return Convert(u32, e)
        case "i32_far":  # |e| * 2^22 up to 2^32: past i32's range both ways (exact in f32)
            far = Binary(Op.MUL, e if ty == f32 else Convert(f32, e), Lit(FAR, f32))
            return Convert(u32, Convert(i32, far))
        case "u32_far":  # up to 2^32: past u32's greatest value
            return Convert(u32, Binary(Op.MUL, e if ty == f32 else Convert(f32, e), Lit(FAR, f32)))
        case "select":
            return Call(Op.SELECT, (Lit(7, u32), Lit(9, u32), draw(condition(1, scope))))
    raise AssertionError


@st.composite
def stmts(draw, fresh: Fresh, depth: int, scope: dict):
    """Statements over the float variables; ``let``\\ s join ``scope``."""
    scope = {t: list(v) if isinstance(v, list) else v for t, v in scope.items()}
    types = [t for t in READ if scope.get(HALVES, True) or scalar(t) != f16]
    out = []
    for _ in range(draw(st.integers(1, 4))):
        kinds = ["let", "assign", "compound", "store", "store_int"]
        if depth > 0:
            kinds += ["if", "for"]
        e = lambda t: expr(t, 3, scope)  # noqa: E731
        match draw(st.sampled_from(kinds)):
            case "let":
                ty = draw(st.sampled_from(types))
                name = fresh("t")
                out.append(Let(name, draw(e(ty))))
                scope.setdefault(ty, []).append(Name(name))
                if draw(st.booleans()):  # read back now, whether or not a later one reads it
                    values = as_f32(Name(name), ty)
                    first = draw(st.integers(FIXED, FSLOTS - len(values)))
                    out += [Assign(f_slot(first + k), v) for k, v in enumerate(values)]
            case "assign":
                ty = draw(st.sampled_from(types))
                out.append(Assign(Name(WRITE[ty]), draw(e(ty))))
            case "compound":  # then back into range
                ty = draw(st.sampled_from(types))
                op = draw(st.sampled_from([Op.ADD, Op.SUB, Op.MUL]))
                by = draw(small(ty, 2, scope)) if op is Op.MUL else draw(e(ty))
                v = Name(WRITE[ty])
                out += [Assign(v, by, op), Assign(v, limit(v, ty))]
            case "store":
                ty = draw(st.sampled_from(types))
                values = as_f32(draw(e(ty)), ty)
                first = draw(st.integers(FIXED, FSLOTS - len(values)))
                out += [Assign(f_slot(first + k), v) for k, v in enumerate(values)]
            case "store_int":
                slot = draw(st.integers(PACKED[-1] + 1, USLOTS - 1))
                out.append(Assign(u_slot(slot), draw(integer_result(scope))))
            case "if":
                then = draw(stmts(fresh, depth - 1, scope))
                orelse = draw(st.one_of(st.just(()), stmts(fresh, depth - 1, scope)))
                out.append(If(draw(condition(1, scope)), then, orelse))
            case "for":
                i = fresh("i")
                body = draw(stmts(fresh, depth - 1, scope))
                cond = Binary(Op.LT, Name(i), Lit(draw(st.integers(0, 3)), u32))
                out.append(
                    For(Var(i, u32, Lit(0, u32)), cond, Assign(Name(i), Lit(1, u32), Op.ADD), body)
                )
    return tuple(out)


def _at(buffer: str, k: int):
    per = {"fin": 4, "hin": 2}[buffer]
    at = Binary(Op.ADD, Binary(Op.MUL, Member(Name("gid"), "x"), Lit(per, u32)), Lit(k, u32))
    return Index(Name(buffer), at)


PRELUDE = (
    *(Let(n, _at("fin", k)) for k, n in enumerate("abcd")),
    Let("h", _at("hin", 0)),
    Let("g", _at("hin", 1)),
    Let("x", Index(Name("uin"), Member(Name("gid"), "x"))),
    Let(
        "y", Convert(i32, Index(Name("uin"), Binary(Op.ADD, Member(Name("gid"), "x"), Lit(N, u32))))
    ),
    Let("va", Construct(V4, (Name("a"), Name("b"), Name("c"), Name("d")))),
    Let("vh", Construct(V2H, (Name("h"), Name("g")))),
    Var("fa", f32, Name("d")),
    Var("fv", V4, Member(Name("va"), "wzyx")),
    Var("fh", f16, Name("g")),
    Var("fw", V2H, Member(Name("vh"), "yx")),
    Let("vx", Construct(V4H, (Name("h"), Name("g"), Name("g"), Name("h")))),
    Var("fx", V4H, Member(Name("vx"), "wzyx")),
)
HALF_NAMES = {"h", "g", "vh", "fh", "fw", "vx", "fx"}


def prelude(halves: bool) -> tuple:
    """The inputs and variables (without the f16 ones unless ``halves``)."""
    return tuple(s for s in PRELUDE if halves or s.name not in HALF_NAMES)


def epilogue(halves: bool) -> tuple:
    """Every variable into its slots: :data:`FIXED` f32 slots, 4 integers, 2 packed words (the
    f16 variables' slots take f32 components where there are none)."""
    fh = Name("fh") if halves else Member(Name("fv"), "y")
    fw = Name("fw") if halves else Member(Name("fv"), "zw")
    wide = Convert(Vec(2, f32), fw) if halves else fw
    values = as_f32(Name("fa"), f32) + as_f32(Name("fv"), V4)
    values += [Convert(f32, fh) if halves else fh, Member(wide, "x"), Member(wide, "y")]
    values += as_f32(Name("fx"), V4H) if halves else as_f32(Member(Name("fv"), "yxwz"), V4)
    out = tuple(Assign(f_slot(j), v) for j, v in enumerate(values))
    # The f16 variables packed as the catalog's flat kernels carry halves, and one word of
    # f16's grid from f32 values.
    pair = limit(onto_grid(Member(Name("fv"), "zw"), Vec(2, f32), Op.FLOOR, f16), Vec(2, f32), f16)
    carried = Construct(Vec(2, f32), (Convert(f32, fh), Member(wide, "y"))) if halves else pair
    far = lambda e: Binary(Op.MUL, e, Lit(FAR, f32))  # noqa: E731
    if halves:  # the f16 variables stored as f16 too (four vec2<f16> an invocation)
        at = lambda k: Index(  # noqa: E731
            Name("halves"),
            Binary(Op.ADD, Binary(Op.MUL, Member(Name("gid"), "x"), Lit(4, u32)), Lit(k, u32)),
        )
        out += (
            Assign(at(0), Name("fw")),
            Assign(at(1), Construct(V2H, (Name("fh"), Name("h")))),
            Assign(at(2), Member(Name("fx"), "xy")),
            Assign(at(3), Member(Name("fx"), "zw")),
        )
    return out + (
        Assign(u_slot(0), Convert(u32, Convert(i32, far(Name("fa"))))),
        Assign(u_slot(1), Convert(u32, far(Member(Name("fv"), "x")))),
        Assign(u_slot(2), Convert(u32, Convert(i32, fh))),
        Assign(u_slot(3), Convert(u32, Member(fw, "y"))),
        Assign(u_slot(PACKED[0]), Call(Op.PACK2X16FLOAT, (carried,))),
        Assign(u_slot(PACKED[1]), Call(Op.PACK2X16FLOAT, (pair,))),
    )


@st.composite
def kernels(draw, fixed_unpack: bool = True, halves: bool = True):
    """A verified float kernel around a random body (no unpack2x16float of a word fixed when
    the shader compiles unless ``fixed_unpack``; no f16 values unless ``halves``)."""
    scope = {FIXED_UNPACK: fixed_unpack, HALVES: halves}
    body = prelude(halves) + draw(stmts(Fresh(), 2, scope)) + epilogue(halves)
    bindings = (
        Binding("fin", f32, "read"),
        *((Binding("hin", f16, "read"),) if halves else ()),
        Binding("uin", u32, "read"),
        Binding("out", f32, "read_write"),
        Binding("words", u32, "read_write"),
        *((Binding("halves", V2H, "read_write"),) if halves else ()),
    )
    return verify(kernel_of("gen_float", bindings, body))


def inputs(seed: int, halves: bool = True) -> dict:
    """Grid values with edges (ties for ``round``, -0.0, both limits) in a third of them."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, ty, count in (("fin", f32, 4 * N), ("hin", f16, 2 * N))[: 1 + halves]:
        grid, lim, _ = DOMAIN[ty]
        k = rng.integers(-int(lim * grid), int(lim * grid) + 1, count)
        v = (k / grid).astype(ty.dtype)
        edges = np.array([0.0, -0.0, 0.5, -0.5, 2.5, -2.5, 1.5, lim, -lim, 1 / grid], ty.dtype)
        pick = rng.random(count) < 0.33
        v[pick] = rng.choice(edges, int(pick.sum()))
        out[name] = v
    words = rng.integers(0, 2**32, 2 * N, dtype=np.uint64).astype(np.uint32)
    pick = rng.random(2 * N) < 0.4
    words[pick] = rng.choice(
        np.array([0, 1, 1023, 1024, 1025, 2**31, 2**32 - 1, 2**32 - 1024], np.uint32),
        int(pick.sum()),
    )
    out["uin"] = words
    out["out"] = np.full(N * FSLOTS, np.nan, np.float32)
    out["words"] = np.full(N * USLOTS, POISON, np.uint32)
    if halves:  # f16 stores: four vec2<f16> an invocation
        out["halves"] = np.full(N * 8, np.nan, np.float16)
    return out


def _unsigned_zero_halves(w: np.ndarray) -> np.ndarray:
    """Packed words with a half of -0.0 read as +0.0."""
    w = w.copy()
    for shift in (0, 16):
        half = (w >> shift) & 0xFFFF
        w[half == 0x8000] &= ~np.uint32(0x8000 << shift)
    return w


def differences(want: dict, got: dict) -> list[str]:
    """Where the GPU's outputs differ from the interpreter's: floats as values, packed halves
    with a zero's sign ignored, other words bit for bit."""
    wf, gf = want["out"], got["out"]
    bad_f = np.flatnonzero(~((wf == gf) | (np.isnan(wf) & np.isnan(gf))))
    ww, gw = want["words"].copy(), got["words"].copy()
    packed = np.zeros(ww.size, bool)
    for j in PACKED:
        packed[j::USLOTS] = True
    ww[packed], gw[packed] = _unsigned_zero_halves(ww[packed]), _unsigned_zero_halves(gw[packed])
    bad_w = np.flatnonzero(ww != gw)
    out = []
    if "halves" in want:
        wh, gh = want["halves"], got["halves"]
        bad_h = np.flatnonzero(~((wh == gh) | (np.isnan(wh) & np.isnan(gh))))
        out += [
            f"f16 {i} of the stored halves: GPU {gh[i]!r}, interpreter {wh[i]!r}" for i in bad_h[:3]
        ]
    out += [
        f"f32 slot {i % FSLOTS} of invocation {i // FSLOTS}: GPU {gf[i]!r}, interpreter {wf[i]!r}"
        for i in bad_f[:3]
    ]
    out += [
        f"u32 slot {i % USLOTS} of invocation {i // USLOTS}: GPU {gw[i]:#x}, interpreter {ww[i]:#x}"
        for i in bad_w[:3]
    ]
    return out


@fuzz_settings(120)
@given(data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_float_kernels_agree_on_gpu_and_interpreter(gpu, deviations, data, seed: int) -> None:
    # On an adapter known to unpack a fixed word wrong, the kernels unpack none (the test below
    # shows the deviation); everywhere else some do. An adapter without shader-f16 (Dawn on an
    # H200 unless KVDSL_DAWN_ENABLE=vulkan_enable_f16_on_nvidia) runs them without f16 values,
    # where KVDSL_EXCUSE_FEATURES=shader-f16 excuses it; elsewhere that fails.
    halves = suite_feature(gpu, "shader-f16")
    k = data.draw(kernels("constant unpack2x16float" not in deviations, halves), label="k")
    _agree(k, seed, halves)


@fuzz_settings(30)
@given(data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_f32_kernels_agree_on_gpu_and_interpreter(gpu, deviations, data, seed: int) -> None:
    # The kernels an adapter without shader-f16 gets, here on every adapter.
    k = data.draw(kernels("constant unpack2x16float" not in deviations, False), label="k")
    assert "f16" not in emit(k)
    _agree(k, seed, False)


def _agree(k: Kernel, seed: int, halves: bool) -> None:
    from kvdsl.runtime import run

    assert_round_trip(k)  # the float literals and nesting read back as built
    buffers = inputs(seed, halves)
    want = interp_run(k, buffers, None, (GROUPS, 1, 1))
    # The fixed epilogue writes these on every path (slots FIXED.. only where the body stores).
    assert not np.isnan(want["out"].reshape(N, FSLOTS)[:, :FIXED]).any()
    assert not halves or not np.isnan(want["halves"]).any()
    assert (want["words"].reshape(N, USLOTS)[:, [*INTS, *PACKED]] != POISON).all()
    got = run(k, buffers, None, (GROUPS, 1, 1))
    bad = differences(want, got)
    assert not bad, "\n".join(bad) + "\n" + emit(k)


def test_unpack2x16float_of_a_fixed_word(gpu, deviations) -> None:
    # The same word, 0x38003400 (f16 0.25 low, 0.5 high), unpacked as a literal, through a let
    # and a var, and loaded: WGSL says (0.25, 0.5) each time. llvmpipe (Mesa 22.3) gives the
    # fixed forms' high lane as 0.0 (the float fuzz found it; kvdsl check notes the construct).
    from kvdsl.ir import KernelBuilder, call, lit
    from kvdsl.runtime import run

    kb = KernelBuilder("fixed_unpack", 1)
    src = kb.binding("src", u32, "read")
    out = kb.binding("out", f32, "read_write")
    word = kb.let("word", lit(0x38003400, u32))
    held = kb.var("held", u32, 0x38003400)
    forms = [lit(0x38003400, u32), word, held, src[0]]
    for j, w in enumerate(forms):
        lanes = call(Op.UNPACK2X16FLOAT, w)
        out[2 * j] = lanes[0]
        out[2 * j + 1] = lanes[1]
    k = kb.build()
    buffers = {"src": np.array([0x38003400], np.uint32), "out": np.full(8, np.nan, np.float32)}
    want = interp_run(k, buffers, None, (1, 1, 1))["out"]
    assert want.tolist() == [0.25, 0.5] * 4
    got = run(k, buffers, None, (1, 1, 1))["out"]
    assert got[6:].tolist() == [0.25, 0.5]  # the loaded word, everywhere
    if "constant unpack2x16float" in deviations and got.tolist() != want.tolist():
        pytest.xfail(f"GPU {got.tolist()}: {deviations['constant unpack2x16float']}")
    assert got.tolist() == want.tolist()
