"""The text form is faithful: ``parse(emit(k)) == k`` and ``emit(parse(text)) == text``.

For every kernel available (the transpose variants, and the catalog when it exists) and for
hypothesis-generated kernels whose bodies hold random well-typed expressions and statements:
every op of the op table, literals of every type (negative and edge values included), nested
ifs / else-ifs / fors / loops / blocks, var arrays, vectors and swizzles, comments.
"""

from __future__ import annotations

import importlib.util
import re

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kvdsl.emit import emit
from kvdsl.frontend import parse
from kvdsl.ir import ops
from kvdsl.ir.tree import (
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
    Unary,
    Var,
    WorkgroupVar,
    walk,
)
from kvdsl.ir.ops import Op
from kvdsl.ir.types import Array, Struct, Vec, bool_, f16, f32, i32, u32
from kvdsl.ir.verify import VerifyError, verify
from kvdsl.kernels.transpose import TransposeConfig, transpose
from tests.helpers.fuzz import database
from tests.helpers.roundtrip import Fresh, assert_round_trip, literals


def available_kernels() -> dict[str, Kernel]:
    """Every kernel the project can build today: transpose variants, plus the catalog."""
    out = {
        f"transpose_{h}_{d}_{v}_{t}": transpose(TransposeConfig(h, d, v, t, t))
        for h, d, v, t in [(8, 128, True, "f32"), (2, 6, False, "f32"), (4, 64, True, "f16")]
    }
    if importlib.util.find_spec("kvdsl.catalog") is not None:
        from kvdsl.catalog import all_kernels

        out.update(all_kernels())
    return out


KERNELS = available_kernels()


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_kernel_round_trip(name: str) -> None:
    assert_round_trip(KERNELS[name])


def test_parse_names_kernel_and_takes_dispatch() -> None:
    k = KERNELS["transpose_8_128_True_f32"]
    assert parse(emit(k), "dir/copy_rows.wgsl").name == "copy_rows"
    assert parse(emit(k)).name == "main"
    assert parse(emit(k)).dispatch is None
    assert parse(emit(k), dispatch=k.dispatch).dispatch == k.dispatch


# ---- generated kernels ------------------------------------------------------------------------

V4F, V2U, V2F = Vec(4, f32), Vec(2, u32), Vec(2, f32)
ARR = Array(f32, 4)
PARAMS = Struct("Params", (("n", u32), ("s", f32)))
# Names of each type in scope of every generated statement (declared by the prelude).
NAMES = {
    u32: [Name("vu"), Member(Name("gid"), "x"), Member(Name("params"), "n")],
    i32: [Name("vi")],
    f32: [Name("vf"), Member(Name("params"), "s")],
    f16: [Name("vh")],
    bool_: [Name("vb")],
    V4F: [Name("v4")],
    V2U: [Member(Name("gid"), "xy"), Name("v2")],
    V2F: [],
}
SCALARS = (u32, i32, f32, f16, bool_)
TYPES = SCALARS + (V4F, V2U, V2F)
ARITH = (Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.MOD)
BITS = (Op.AND, Op.OR, Op.XOR)
FLOAT_FNS = (Op.ROUND, Op.FLOOR, Op.CEIL, Op.TRUNC, Op.SQRT, Op.INVERSE_SQRT, Op.EXP, Op.LOG)
FLOAT_FNS += (Op.COS, Op.SIN)


def _divisor(op, b, ty):
    """``b`` as an integer divisor WGSL takes whatever its value: at least 1 (a constant 0, or
    i32's least value over -1, is an error when WGSL compiles)."""
    if op not in (Op.DIV, Op.MOD) or not ty.scalar.is_int:
        return b
    one = Lit(1, ty) if ty in SCALARS else Construct(ty, (Lit(1, ty.elem),) * ty.n)
    return Call(Op.MAX, (b, one))


def _no_lit_neg(x):
    # "-(3u)" prints as "-3u", which reads back as the literal -3: not this IR.
    return x if not isinstance(x, Lit) else Convert(x.ty, x)


@st.composite
def expr(draw, ty, depth: int):
    """A well-typed expression of ``ty``."""
    leaves = [literals(ty)] if ty in SCALARS else []
    if NAMES[ty]:
        leaves.append(st.sampled_from(NAMES[ty]))
    if ty == f32:
        leaves.append(
            st.builds(lambda i: Index(Name("arr"), i), st.sampled_from([Lit(1, u32), Lit(3, i32)]))
        )
    if depth <= 0 or (leaves and draw(st.integers(0, 4)) == 0):
        if not leaves:
            return Convert(V2F, draw(expr(V2U, 0)))
        return draw(st.one_of(leaves))
    sub = lambda t: expr(t, depth - 1)  # noqa: E731
    kinds = ["call_sel", "convert"]
    scalar = ty.scalar
    if scalar.is_numeric:
        kinds += ["arith", "minmax", "abs"]
    if ty in (i32, f32, f16, V4F, V2F):
        kinds.append("neg")
    if ty in (u32, i32, V2U):
        kinds += ["bits", "shift", "bitnot"]
    if ty == bool_:
        kinds += ["compare", "logic", "not", "boolbits"]
    if scalar.is_float:
        kinds += ["float_fn", "fma"]
    if ty == f32:
        kinds += ["dot", "index", "swizzle", "helper"]
    if ty in (V4F, V2F):
        kinds += ["construct", "vec_scalar"]
    if ty == V2F:
        kinds.append("swizzle2")
    kind = draw(st.sampled_from(kinds))
    match kind:
        case "arith":
            op = draw(st.sampled_from(ARITH))
            return Binary(op, draw(sub(ty)), _divisor(op, draw(sub(ty)), ty))
        case "vec_scalar":
            op = draw(st.sampled_from(ARITH))
            a, b = draw(sub(ty)), draw(sub(ty.elem))
            if draw(st.booleans()):
                return Binary(op, a, _divisor(op, b, ty.elem))
            return Binary(op, b, _divisor(op, a, ty))
        case "bits" | "boolbits":
            return Binary(
                draw(st.sampled_from(BITS[:2] if ty == bool_ else BITS)),
                draw(sub(ty)),
                draw(sub(ty)),
            )
        case "shift":
            # 15 bits shifted by under 16, whatever the operands evaluate to: WGSL rejects a
            # constant shift by 32 or more, and one that overflows.
            amount = V2U if isinstance(ty, Vec) else u32

            def fill(x, t):
                return Lit(x, t) if t in SCALARS else Construct(t, (Lit(x, t.elem),) * t.n)

            by = Binary(Op.MOD, draw(sub(amount)), fill(16, amount))
            low = Binary(Op.AND, draw(sub(ty)), fill(0x7FFF, ty))
            return Binary(draw(st.sampled_from([Op.SHL, Op.SHR])), low, by)
        case "compare":
            t = draw(st.sampled_from([u32, i32, f32, f16]))
            op = draw(st.sampled_from(sorted(ops.COMPARISONS, key=str)))
            return Binary(op, draw(sub(t)), draw(sub(t)))
        case "logic":
            return Binary(
                draw(st.sampled_from([Op.LAND, Op.LOR])), draw(sub(bool_)), draw(sub(bool_))
            )
        case "neg":
            return Unary(Op.NEG, _no_lit_neg(draw(sub(ty))))
        case "not":
            return Unary(Op.NOT, draw(sub(bool_)))
        case "bitnot":
            return Unary(Op.BITNOT, draw(sub(ty)))
        case "minmax":
            op = draw(st.sampled_from([Op.MIN, Op.MAX, Op.CLAMP]))
            args = tuple(draw(sub(ty)) for _ in range(ops.info(op).arity))
            if op is Op.CLAMP:  # bounds in order whatever they evaluate to (WGSL checks constants)
                lo, hi = args[1:]
                args = (args[0], Call(Op.MIN, (lo, hi)), Call(Op.MAX, (lo, hi)))
            return Call(op, args)
        case "abs":
            return Call(Op.ABS, (draw(sub(ty)),))
        case "call_sel":
            return Call(Op.SELECT, (draw(sub(ty)), draw(sub(ty)), draw(sub(bool_))))
        case "float_fn":
            return Call(draw(st.sampled_from(FLOAT_FNS)), (draw(sub(ty)),))
        case "fma":
            return Call(Op.FMA, (draw(sub(ty)), draw(sub(ty)), draw(sub(ty))))
        case "dot":
            return Call(Op.DOT, (draw(sub(V4F)), draw(sub(V4F))))
        case "index":
            # In range whatever it evaluates to (WGSL rejects a constant index past the end).
            return Index(draw(sub(V4F)), Call(Op.MIN, (draw(sub(u32)), Lit(3, u32))))
        case "swizzle":
            return Member(draw(sub(V4F)), draw(st.sampled_from("xyzw")))
        case "swizzle2":
            return Member(draw(sub(V4F)), draw(st.sampled_from(["xy", "zw", "wx", "yy"])))
        case "helper":
            return FnCall("helper", (draw(sub(f32)), draw(sub(u32))))
        case "construct":
            if ty == V4F and draw(st.booleans()):
                return Construct(V4F, (draw(sub(V2F)), draw(sub(f32)), draw(sub(f32))))
            return Construct(ty, tuple(draw(sub(f32)) for _ in range(ty.n)))
        case "convert":
            if isinstance(ty, Vec):
                src = V2U if ty == V2F else V2F
                return Convert(ty, draw(sub(src))) if ty != V4F else draw(sub(V4F))
            src = draw(
                st.sampled_from([u32, i32, f32, f16, bool_] if ty != bool_ else [u32, i32, f32])
            )
            return Convert(ty, draw(sub(src)))
    raise AssertionError(kind)


WRITABLE = {u32: "vu", i32: "vi", f32: "vf", f16: "vh", bool_: "vb", V4F: "v4", V2U: "v2"}
COMPOUND = {u32: ARITH + BITS, i32: ARITH + BITS, f32: ARITH, f16: ARITH, V4F: ARITH}
COMPOUND[bool_] = (Op.AND, Op.OR)
COMPOUND[V2U] = ARITH + BITS
TEXT = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=20).map(str.rstrip)


@st.composite
def stmts(draw, fresh: Fresh, depth: int, in_loop: bool, in_main: bool):
    """A block of well-typed statements."""
    out = []
    for _ in range(draw(st.integers(0, 4))):
        kinds = ["let", "assign", "compound", "store", "elem", "comment", "var"]
        if depth > 0:
            kinds += ["if", "for", "loop", "block"]
        if in_loop:
            kinds += ["break", "continue"]
        if in_main:
            kinds.append("return")
        kind = draw(st.sampled_from(kinds))
        e = lambda t: expr(t, 2)  # noqa: E731
        match kind:
            case "let":
                out.append(Let(fresh("t"), draw(e(draw(st.sampled_from(TYPES))))))
            case "var":
                ty = draw(st.sampled_from([u32, i32, f32, f16, bool_, V4F, ARR]))
                if ty == ARR:
                    init = Construct(ARR, tuple(draw(e(f32)) for _ in range(4)))
                else:
                    init = draw(e(ty))
                out.append(Var(fresh("w"), ty, draw(st.sampled_from([None, init]))))
            case "assign":
                ty = draw(st.sampled_from(sorted(WRITABLE, key=str)))
                out.append(Assign(Name(WRITABLE[ty]), draw(e(ty))))
            case "compound":
                ty = draw(st.sampled_from(sorted(WRITABLE, key=str)))
                op = draw(
                    st.sampled_from(COMPOUND[ty] + ((Op.SHL, Op.SHR) if ty in (u32, i32) else ()))
                )
                value = draw(e(u32 if op in (Op.SHL, Op.SHR) else ty))
                if op in (Op.SHL, Op.SHR):  # an amount under 32 whatever it evaluates to
                    value = Binary(Op.MOD, value, Lit(32, u32))
                else:
                    value = _divisor(op, value, ty)
                out.append(Assign(Name(WRITABLE[ty]), value, op))
            case "store":
                ty, buf = draw(st.sampled_from([(f32, "out_f"), (u32, "out_u"), (V4F, "out_v")]))
                index, value = draw(e(u32)), draw(e(ty))
                # WGSL evaluates the reference first: the frontend takes an index that calls a
                # helper, or that reads memory a call in the value may change, into a let of its
                # own before the store (kvdsl.frontend.assign.hoisted), a form of its own.
                assume(not _calls(index) and not (_calls(value) and _reads_memory(index)))
                out.append(Assign(Index(Name(buf), index), value))
            case "elem":
                target = draw(
                    st.sampled_from([Index(Name("arr"), Lit(2, u32)), Member(Name("v4"), "y")])
                )
                out.append(Assign(target, draw(e(f32))))
            case "comment":
                out.append(Comment(draw(TEXT)))
            case "if":
                then = draw(stmts(fresh, depth - 1, in_loop, in_main))
                orelse = draw(
                    st.one_of(
                        st.just(()),
                        stmts(fresh, depth - 1, in_loop, in_main),
                        stmts(fresh, depth - 1, in_loop, in_main).map(
                            lambda b: (If(Lit(True, bool_), b),)
                        ),
                    )
                )
                out.append(If(draw(e(bool_)), then, orelse))
            case "for":
                i = fresh("i")
                init = draw(st.sampled_from([None, Var(i, u32, Lit(0, u32)), Let(i, Lit(0, u32))]))
                cond = draw(st.one_of(st.none(), e(bool_)))
                update = draw(st.sampled_from([None, Assign(Name("vu"), Lit(1, u32), Op.ADD)]))
                body = draw(stmts(fresh, depth - 1, True, in_main))
                if cond is None:  # a way out first (WGSL refuses a loop that never exits)
                    body = (If(draw(e(bool_)), (Break(),)),) + body
                out.append(For(init, cond, update, body))
            case "loop":
                body = draw(stmts(fresh, depth - 1, True, in_main))
                out.append(Loop((If(draw(e(bool_)), (Break(),)),) + body + (Break(),)))
            case "block":
                out.append(Block(draw(stmts(fresh, depth - 1, in_loop, in_main))))
            case "break":
                out.append(Break())
            case "continue":
                out.append(Continue())
            case "return":
                out.append(Return())
    return tuple(out)


PRELUDE = (
    Var("vu", u32, Member(Name("gid"), "x")),
    Var("vi", i32, Lit(-3, i32)),
    Var("vf", f32, Lit(0.5, f32)),
    Var("vh", f16, Lit(1.5, f16)),
    Var("vb", bool_, Lit(True, bool_)),
    Var("v4", V4F),
    Var("v2", V2U, Member(Name("gid"), "yz")),
    Var("arr", ARR),
)
EPILOGUE = (
    Assign(Index(Name("out_f"), Lit(0, u32)), Name("vf")),
    Assign(Index(Name("out_u"), Lit(1, u32)), Name("vu")),
    Assign(Index(Name("out_v"), Lit(2, u32)), Name("v4")),
)


def _calls(e: Expr) -> bool:
    return any(type(n) is FnCall for n in walk(e))


def _reads_memory(e: Expr) -> bool:
    return any(type(n) is Index for n in walk(e))


@st.composite
def kernels(draw):
    """A verified kernel around a random body (and a helper function)."""
    fresh = Fresh()
    helper = Function(
        "helper",
        (("x", f32), ("y", u32)),
        f32,
        (
            Let("t", Binary(Op.MUL, Name("x"), Convert(f32, Name("y")))),
            If(Binary(Op.GT, Name("t"), Lit(1.0, f32)), (Return(Lit(-2.5, f32)),)),
            Return(Name("t")),
        ),
    )
    body = PRELUDE + draw(stmts(fresh, 3, False, True)) + EPILOGUE
    shared: tuple[WorkgroupVar, ...] = ()
    if draw(st.booleans()):
        # Workgroup memory, with the barrier before any statement that may return.
        shared = (WorkgroupVar("tile", Array(f32, 16)), WorkgroupVar("tile_v", Array(V4F, 2)))
        lane = Binary(Op.MOD, Member(Name("lid"), "x"), Lit(16, u32))
        body = (
            PRELUDE
            + (Assign(Index(Name("tile"), lane), Name("vf")), Barrier())
            + draw(stmts(fresh, 3, False, True))
            + EPILOGUE
            + (Assign(Index(Name("tile_v"), Lit(1, u32)), Name("v4")),)
        )
    k = Kernel(
        name="gen",
        bindings=(
            Binding("inp", f32, "read"),
            Binding("out_f", f32, "read_write"),
            Binding("out_u", u32, "read_write"),
            Binding("out_v", V4F, "read_write"),
        ),
        params=PARAMS,
        consts=(
            Const("WG", u32, Lit(64, u32), "workgroup size"),
            Const("LIMIT", i32, draw(literals(i32))),
            Const("EPS", f32, draw(literals(f32)), "a\n\nmulti-line comment"),
        ),
        functions=(helper,),
        workgroup_size=(64, 1, 1),
        builtins=(("gid", "global_invocation_id"), ("lid", "local_invocation_id")),
        body=body + (Assign(Index(Name("out_f"), Lit(3, u32)), Index(Name("inp"), Name("vu"))),),
        doc=("generated", "", "kernel"),
        workgroup_size_name=draw(st.sampled_from([None, "WG"])),
        workgroup_vars=shared,
    )
    try:
        return verify(k)
    except VerifyError as err:
        # Random float constants can fold to what WGSL refuses (0.0f / 0.0f, sqrt(-1.0f),
        # f16(2147483648u)):
        # those are not kernels, and verify says so; any other refusal is a generator bug.
        assume("when it compiles" not in str(err))  # the float constants' refusals
        raise


def _on_generated_kernels(examples: int):
    """``@given`` generated kernels, ``examples`` of them, with no deadline, in the shared
    database."""

    def wrap(test):
        return settings(
            max_examples=examples,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
            database=database(),
        )(given(kernels())(test))

    return wrap


@_on_generated_kernels(500)
def test_generated_round_trip(k: Kernel) -> None:
    assert_round_trip(k)


FLOAT_FOLDING = (
    "Float literal is NaN",
    "Float literal is infinite",
    "built-in function argument is out of valid range",
    "Divide operation overflowed",
    "Modulo operation overflowed",
    "Multiply operation overflowed",
    "Add operation overflowed",
    "Subtract operation overflowed",
    "exp operation overflowed",
)


@_on_generated_kernels(200)
def test_generated_kernels_that_verify_compile_under_naga(k: Kernel) -> None:
    # What the verifier takes, a WGSL compiler takes: the names, constant shifts, divisions,
    # indices, clamp bounds and float constants it refuses are the ones naga refuses. One
    # refusal of naga's own stays out: a constant index of 4294967295 into a runtime-sized array
    # (WGSL leaves that to the run; naga's validator rejects it, however it is spelt).
    from kvdsl.runtime import compile_wgsl

    try:
        compile_wgsl(emit(k))
    except Exception as err:
        assume("Accessing index 4294967295 is out of" not in str(err))
        # The verifier folds the float constants kernels write (literals, consts, arithmetic,
        # builtins, select on a literal); naga folds every float const-expression of the
        # generator's random ones (comparisons made constant, say). Those refusals are naga's.
        assume(not any(f"{what}" in str(err) for what in FLOAT_FOLDING))
        raise


@settings(
    max_examples=3, deadline=None, suppress_health_check=list(HealthCheck), database=database()
)
@given(st.lists(kernels(), min_size=40, max_size=40))
def test_generated_kernels_that_verify_compile_under_tint(ks: list[Kernel]) -> None:
    # The same under Tint (Dawn's compiler, through wgpudawn's Null backend), forty kernels a
    # worker: Tint also refuses a loop that never exits (WGSL's behaviour analysis).
    from kvdsl.runtime import tint_check

    got = tint_check({f"k{i}": emit(k) for i, k in enumerate(ks)})
    refused = {name: err for name, err in got.items() if err is not None}
    refused = {n: e for n, e in refused.items() if not TINT_FOLDING.search(e)}
    assert not refused, next(iter(refused.values()))


# Tint's refusals of constants past their type, which come of folding the verifier leaves to
# the compilers (a conversion of an integer it does not fold, a float const-expression of the
# generator's made constant): Tint folds every const-expression. The printer's own literals
# past their type are test_emit.py's (f32's largest value).
TINT_FOLDING = re.compile(r"cannot be represented as|is not finite|overflow")
