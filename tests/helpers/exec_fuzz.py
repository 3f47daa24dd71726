"""The generator of integer kernels that run on the GPU and in the interpreter
(``tests/interp/test_exec_fuzz.py``, whose docstring says what it draws; the workgroup kernels of
``tests/interp/test_exec_fuzz_workgroup.py`` build on its expressions and statements): types and
names in scope, expressions, statements, helper functions, whole kernels, their inputs, the
hypothesis settings, and the outputs of both runs."""

from __future__ import annotations

import re

import numpy as np
from hypothesis import HealthCheck, assume, settings
from hypothesis import strategies as st

from kvdsl.interp import run as interp_run
from kvdsl.ir import ops
from kvdsl.ir.tree import (
    Assign,
    Binary,
    Binding,
    Block,
    Break,
    Call,
    Construct,
    Continue,
    Convert,
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
    walk,
)
from kvdsl.ir.ops import Op
from kvdsl.ir.portability import SELECT_DIVISOR, hazards, select_of_its_condition
from kvdsl.ir.types import Scalar, Struct, Vec, bool_, i32, u32
from kvdsl.ir.verify import VerifyError, verify
from tests.helpers.fuzz import examples
from tests.helpers.roundtrip import Fresh, literals

V2U, V2I = Vec(2, u32), Vec(2, i32)
TYPES = (u32, i32, bool_, V2U, V2I)
SIGNED = (i32, V2I)
WG, GROUPS = 64, 2
N = WG * GROUPS  # invocations
SLOTS = 8  # output words per invocation
POISON = 0xDEADBEEF
# The names every statement may read; the variables it may assign.
READ = {
    u32: [Name("x"), Name("vu"), Name("z"), Member(Name("params"), "n"), Member(Name("gid"), "x")],
    i32: [Name("y"), Name("vi"), Name("zi"), Name("m")],
    bool_: [Name("vb")],
    V2U: [Name("v2"), Member(Name("gid"), "xy")],
    V2I: [Name("w2")],
}
WRITE = {u32: "vu", i32: "vi", bool_: "vb", V2U: "v2", V2I: "w2"}
ARITH = (Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.MOD)
BITS = (Op.AND, Op.OR, Op.XOR)
COMPARE = (Op.LT, Op.LE, Op.GT, Op.GE, Op.EQ, Op.NE)
EDGES = np.array([0, 1, 2, 31, 32, 33, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0xFFFFFFFE], np.uint32)


def _lit(draw, ty):
    if isinstance(ty, Vec):
        return Construct(ty, (draw(literals(ty.elem)), draw(literals(ty.elem))))
    return draw(literals(ty))


def _names(ty, scope: dict) -> list:
    """The names of ``ty`` an expression in ``scope`` may read (in a helper, its own only)."""
    return ([] if scope.get(IN_HELPER) else READ[ty]) + scope.get(ty, [])


@st.composite
def expr(draw, ty, depth: int, scope: dict):
    """A well-typed integer or bool expression of ``ty`` over ``scope``'s names."""
    names = _names(ty, scope)
    if depth <= 0 or draw(st.integers(0, 7)) == 0:
        if not names or draw(st.integers(0, 2)) == 0:
            return _lit(draw, ty)
        return draw(st.sampled_from(names))
    sub = lambda t: expr(t, depth - 1, scope)  # noqa: E731
    kinds = ["select"]
    callable_ = [f for f in scope.get(HELPERS, ()) if f.ret == ty]
    if callable_:
        kinds += ["call", "call"]
    if ty in (u32, i32, V2U, V2I):
        kinds += ["arith", "divide", "bits", "shift", "bitnot", "minmax", "convert"]
        if ty not in SIGNED or scope.get(SIGNED_ABS, True):
            kinds.append("abs")
    if ty in SIGNED:
        kinds += ["neg", "divide_min"]
    if ty in (u32, i32):
        kinds += ["swizzle"]
    if ty in (V2U, V2I):
        kinds += ["construct", "vec_scalar", "swizzle2"]
    if ty == bool_:
        kinds += ["compare", "logic", "not", "boolbits", "convert"]
    kind = draw(st.sampled_from(kinds))
    match kind:
        case "arith":
            op = draw(st.sampled_from(ARITH[:3]))
            return Binary(op, draw(sub(ty)), draw(sub(ty)))
        case "divide":
            # A divisor that may be 0 at run time (WGSL: x / 0 == x, x % 0 == 0), or any
            # expression: a constant 0 is refused when WGSL compiles, and skipped below.
            op = draw(st.sampled_from(_divisions(ty, scope)))
            by = draw(st.one_of(st.sampled_from(names), sub(ty)) if names else sub(ty))
            return Binary(op, draw(sub(ty)), by)
        case "divide_min":  # i32's least value over -1 is that value (and % gives 0)
            op = draw(st.sampled_from(_divisions(ty, scope)))
            return Binary(op, draw(sub(ty)), Lit(-1, i32))
        case "vec_scalar":
            op = draw(st.sampled_from(ARITH))  # WGSL mixes a scalar and a vector in these only
            if op not in _divisions(ty, scope) + [Op.ADD, Op.SUB, Op.MUL]:
                op = Op.DIV
            a, b = draw(sub(ty)), draw(sub(ty.elem))
            return Binary(op, a, b) if draw(st.booleans()) else Binary(op, b, a)
        case "bits" | "boolbits":
            ops_ = BITS[:2] if ty == bool_ else BITS  # a bool has & and |, no ^
            return Binary(draw(st.sampled_from(ops_)), draw(sub(ty)), draw(sub(ty)))
        case "shift":
            # A run-time amount is taken modulo 32 (WGSL); a constant one must be under 32.
            amount = V2U if isinstance(ty, Vec) else u32
            runtime = _names(amount, scope)
            by = draw(st.one_of(st.sampled_from(runtime), sub(amount)) if runtime else sub(amount))
            return Binary(draw(st.sampled_from([Op.SHL, Op.SHR])), draw(sub(ty)), by)
        case "bitnot":
            return Unary(Op.BITNOT, draw(sub(ty)))
        case "neg":
            x = draw(sub(ty))  # "-(3i)" would print as the literal -3i: not this IR
            return Unary(Op.NEG, x if not isinstance(x, Lit) else Convert(ty, x))
        case "abs":
            return Call(Op.ABS, (draw(sub(ty)),))
        case "minmax":
            op = draw(st.sampled_from([Op.MIN, Op.MAX, Op.CLAMP]))
            args = tuple(draw(sub(ty)) for _ in range(ops.info(op).arity))
            if op is Op.CLAMP:  # bounds in order (SPIR-V's clamp leaves low > high undefined)
                lo, hi = args[1:]
                args = (args[0], Call(Op.MIN, (lo, hi)), Call(Op.MAX, (lo, hi)))
            return Call(op, args)
        case "select":
            return Call(Op.SELECT, (draw(sub(ty)), draw(sub(ty)), draw(sub(bool_))))
        case "compare":
            t = draw(st.sampled_from([u32, i32]))
            return Binary(draw(st.sampled_from(COMPARE)), draw(sub(t)), draw(sub(t)))
        case "logic":
            return Binary(
                draw(st.sampled_from([Op.LAND, Op.LOR])), draw(sub(bool_)), draw(sub(bool_))
            )
        case "not":
            return Unary(Op.NOT, draw(sub(bool_)))
        case "convert":
            if isinstance(ty, Vec):  # between vec2<u32> and vec2<i32> WGSL keeps the bits
                return Convert(ty, draw(sub(V2I if ty == V2U else V2U)))
            src = draw(st.sampled_from([t for t in (u32, i32, bool_) if t != ty]))
            return Convert(ty, draw(sub(src)))
        case "swizzle":
            return Member(draw(sub(V2U if ty == u32 else V2I)), draw(st.sampled_from("xy")))
        case "swizzle2":
            return Member(draw(sub(ty)), draw(st.sampled_from(["yx", "xx", "yy"])))
        case "call":  # a helper function, maybe under a mask (an if, a loop, a select's arm)
            f = draw(st.sampled_from(callable_))
            return FnCall(f.name, tuple(draw(sub(t)) for _, t in f.params))
        case "construct":
            return Construct(ty, (draw(sub(ty.elem)), draw(sub(ty.elem))))
    raise AssertionError(kind)


#: A key of the names in scope that is no type: False where no signed ``%`` may be drawn (the
#: adapter runs it wrong: ``KNOWN_DEVIATIONS`` in tests/conftest.py).
SIGNED_MOD = "signed %"
#: The same for an i32 ``abs`` (on NVIDIA, max(a, abs(b)) may drop the abs under Dawn, and an
#: abs of i32's least value is taken as positive under wgpu-native).
SIGNED_ABS = "signed abs"
#: The same for an early ``return`` (none before a barrier:
#: tests/interp/test_exec_fuzz_workgroup.py).
RETURNS = "returns"
#: The helper functions an expression may call; whether it stands in one (where only its
#: parameters and its own lets are in scope).
HELPERS, IN_HELPER = "helpers", "in helper"
#: The helpers a kernel may have: name, parameters, result.
SIGNATURES = (
    ("h0", (("a", u32), ("b", i32)), u32),
    ("h1", (("p", V2U), ("q", bool_), ("r", u32)), i32),
)


@st.composite
def helper(draw, fresh: Fresh, name: str, params: tuple, ret, scope: dict) -> Function:
    """A helper over its parameters: lets, a loop accumulating into a var (which may break),
    an early return under a condition, and a last return; it may call the helpers in
    ``scope``'s :data:`HELPERS` (those before it)."""
    scope = {k: v for k, v in scope.items() if not isinstance(k, (Scalar, Vec))}
    scope[IN_HELPER] = True
    for pname, pty in params:
        scope[pty] = scope.get(pty, []) + [Name(pname)]
    body: list = []
    for _ in range(draw(st.integers(0, 2))):
        ty = draw(st.sampled_from([u32, i32, V2U]))
        t = fresh("l")
        body.append(Let(t, draw(expr(ty, 2, scope))))
        scope[ty] = scope.get(ty, []) + [Name(t)]
    acc, i = fresh("acc"), fresh("k")
    body.append(Var(acc, ret, draw(expr(ret, 2, scope))))
    scope[ret] = scope.get(ret, []) + [Name(acc)]
    inner = scope | {u32: scope.get(u32, []) + [Name(i)]}
    op = draw(st.sampled_from([None, Op.ADD, Op.XOR]))
    step: tuple = (Assign(Name(acc), draw(expr(ret, 2, inner)), op),)
    if draw(st.booleans()):
        step = (If(draw(expr(bool_, 2, inner)), (Break(),)),) + step
    trips = Lit(draw(st.integers(0, 3)), u32)
    body += [
        For(
            Var(i, u32, Lit(0, u32)),
            Binary(Op.LT, Name(i), trips),
            Assign(Name(i), Lit(1, u32), Op.ADD),
            step,
        ),
        If(draw(expr(bool_, 2, scope)), (Return(draw(expr(ret, 2, scope))),)),
        Return(draw(expr(ret, 2, scope))),
    ]
    return Function(name, params, ret, tuple(body))


def _divisions(ty, scope: dict) -> list[Op]:
    """The division operators to draw for ``ty`` in ``scope``."""
    return [Op.DIV] if ty in SIGNED and not scope.get(SIGNED_MOD, True) else [Op.DIV, Op.MOD]


def slot(j: int) -> Index:
    """This invocation's output word ``j``."""
    at = Binary(Op.ADD, Binary(Op.MUL, Member(Name("gid"), "x"), Lit(SLOTS, u32)), Lit(j, u32))
    return Index(Name("out"), at)


def as_word(e, ty):
    """``e`` of ``ty`` as one u32 word (a vec2 as its components' xor with y rotated)."""
    if ty == u32:
        return e
    if ty == i32:
        return Convert(u32, e)
    if ty == bool_:
        return Call(Op.SELECT, (Lit(7, u32), Lit(9, u32), e))
    if ty == V2I:
        e = Convert(V2U, e)
    y = Member(e, "y")
    rot = Binary(Op.OR, Binary(Op.SHL, y, Lit(16, u32)), Binary(Op.SHR, y, Lit(16, u32)))
    return Binary(Op.XOR, Member(e, "x"), rot)


@st.composite
def stmts(draw, fresh: Fresh, depth: int, in_loop: str | None, scope: dict):
    """A block of statements; ``let``s join ``scope`` for the statements after them.
    ``in_loop``: "for" or "loop" (a ``continue`` in a ``loop`` would run it again from the top,
    maybe for ever: only ``for`` loops get one)."""
    scope = {t: list(v) if isinstance(v, list) else v for t, v in scope.items()}
    out = []
    for _ in range(draw(st.integers(1, 4))):
        kinds = ["let", "let", "assign", "compound", "store"]
        if depth > 0:
            kinds += ["if", "for", "loop", "block"]
        if in_loop:
            kinds += ["break"] + (["continue"] if in_loop == "for" else [])
        if scope.get(RETURNS, True) and draw(st.integers(0, 3)) == 0:
            kinds.append("return")  # an early return leaves its invocation's slots
        e = lambda t: expr(t, 3, scope)  # noqa: E731
        match draw(st.sampled_from(kinds)):
            case "let":
                ty = draw(st.sampled_from(TYPES))
                name = fresh("t")
                out.append(Let(name, draw(e(ty))))
                scope.setdefault(ty, []).append(Name(name))
            case "assign":
                ty = draw(st.sampled_from(TYPES))
                out.append(Assign(Name(WRITE[ty]), draw(e(ty))))
            case "compound":
                ty = draw(st.sampled_from([u32, i32, V2U, V2I]))
                ops_ = ARITH + BITS + (Op.SHL, Op.SHR)
                if Op.MOD not in _divisions(ty, scope):
                    ops_ = tuple(o for o in ops_ if o is not Op.MOD)
                op = draw(st.sampled_from(ops_))
                by = ty
                if op in (Op.SHL, Op.SHR):  # a shift's amount is unsigned
                    by = V2U if isinstance(ty, Vec) else u32
                out.append(Assign(Name(WRITE[ty]), draw(e(by)), op))
            case "store":
                ty = draw(st.sampled_from(TYPES))
                out.append(Assign(slot(draw(st.integers(5, SLOTS - 1))), as_word(draw(e(ty)), ty)))
            case "if":
                then = draw(stmts(fresh, depth - 1, in_loop, scope))
                orelse = draw(st.one_of(st.just(()), stmts(fresh, depth - 1, in_loop, scope)))
                out.append(If(draw(e(bool_)), then, orelse))
            case "for":
                i = fresh("i")
                trips = draw(st.integers(0, 4))
                body = draw(
                    stmts(fresh, depth - 1, "for", scope | {u32: scope.get(u32, []) + [Name(i)]})
                )
                cond = Binary(Op.LT, Name(i), Lit(trips, u32))
                out.append(
                    For(Var(i, u32, Lit(0, u32)), cond, Assign(Name(i), Lit(1, u32), Op.ADD), body)
                )
            case "loop":
                body = draw(stmts(fresh, depth - 1, "loop", scope))
                out.append(Loop((If(draw(e(bool_)), (Break(),)),) + body + (Break(),)))
            case "block":
                inner = draw(stmts(fresh, depth - 1, in_loop, scope))
                if draw(st.integers(0, 2)) == 0:
                    # A var of an outer var's name, to the block's end: what the block assigns
                    # goes to it, and the outer one is itself again after the block.
                    ty = draw(st.sampled_from(TYPES))
                    inner = (Var(WRITE[ty], ty, draw(e(ty))),) + inner
                out.append(Block(inner))
            case "break":
                out.append(Break())
            case "continue":
                out.append(Continue())
            case "return":
                out.append(If(draw(e(bool_)), (Return(),)))
    return tuple(out)


PRELUDE = (
    Let("x", Index(Name("inp"), Member(Name("gid"), "x"))),
    Let(
        "y", Convert(i32, Index(Name("inp"), Binary(Op.ADD, Member(Name("gid"), "x"), Lit(N, u32))))
    ),
    # 0 or 1, and 0 or -1, by invocation: divisors that are zero (or -1) at run time.
    Let("z", Binary(Op.AND, Binary(Op.SHR, Name("x"), Lit(3, u32)), Lit(1, u32))),
    Let(
        "zi",
        Binary(
            Op.SUB,
            Convert(i32, Binary(Op.AND, Binary(Op.SHR, Name("x"), Lit(4, u32)), Lit(1, u32))),
            Lit(1, i32),
        ),
    ),
    # i32's least value in half the invocations (negated, abs'd or divided by -1 it stays).
    Let(
        "m",
        Call(
            Op.SELECT,
            (Name("y"), Convert(i32, Lit(2**31, u32)), Binary(Op.EQ, Name("z"), Lit(0, u32))),
        ),
    ),
    Var("vu", u32, Binary(Op.XOR, Name("x"), Member(Name("params"), "n"))),
    Var("vi", i32, Name("y")),
    Var("vb", bool_, Binary(Op.EQ, Binary(Op.AND, Name("x"), Lit(1, u32)), Lit(0, u32))),
    Var("v2", V2U, Construct(V2U, (Name("x"), Member(Name("params"), "n")))),
    Var("w2", V2I, Construct(V2I, (Name("y"), Name("m")))),
)
EPILOGUE = tuple(Assign(slot(j), as_word(Name(WRITE[ty]), ty)) for j, ty in enumerate(TYPES))


@st.composite
def kernels(draw, signed_mod: bool = True, signed_abs: bool = True):
    """A verified integer kernel around a random body (no signed ``%`` unless ``signed_mod``,
    no i32 ``abs`` unless ``signed_abs``)."""
    scope = {SIGNED_MOD: signed_mod, SIGNED_ABS: signed_abs}
    fresh = Fresh()
    functions: tuple = ()
    if draw(st.booleans()):  # helpers, each calling the ones before it
        for name, params, ret in SIGNATURES:
            f = draw(helper(fresh, name, params, ret, scope | {HELPERS: functions}))
            functions += (f,)
        scope[HELPERS] = functions
    body = PRELUDE + draw(stmts(fresh, 2, None, scope))
    if functions:  # each helper's result reaches the outputs, whatever the body drew
        body += (
            Assign(Name("vu"), FnCall("h0", (Name("x"), Name("y"))), Op.XOR),
            Assign(Name("vi"), FnCall("h1", (Name("v2"), Name("vb"), Name("vu"))), Op.XOR),
        )
    body += EPILOGUE
    return verified_kernel("gen_int", body, functions=functions)


def verified_kernel(name: str, body: tuple, **fields) -> Kernel:
    """The generated kernel ``name`` over ``inp`` and ``out`` (u32, ``params.n`` of them) with
    ``body``, verified; one the verifier refuses for a constant WGSL refuses is no kernel
    (hypothesis draws again). ``fields`` are further ``Kernel`` fields (functions, builtins,
    workgroup variables)."""
    k = Kernel(
        name=name,
        bindings=(Binding("inp", u32, "read"), Binding("out", u32, "read_write")),
        params=Struct("Params", (("n", u32),)),
        consts=(),
        functions=fields.pop("functions", ()),
        workgroup_size=(WG, 1, 1),
        builtins=fields.pop("builtins", (("gid", "global_invocation_id"),)),
        body=body,
        **fields,
    )
    try:
        return verify(k)
    except VerifyError as err:
        assume(not CONSTANT_REFUSED.search(str(err)))  # a constant WGSL refuses: not a kernel
        raise


# naga's and Tint's refusals of constants they fold and the verifier does not.
COMPILER_FOLDING = re.compile(r"operation overflowed|by zero|[Ss]hift|cannot be represented as")
# The verifier's refusals of constant sub-expressions, as WGSL compilers refuse them.
CONSTANT_REFUSED = re.compile(
    r"when it compiles|a shift by \d+: integers have 32 bits|by the constant 0|"
    r"least value over -1 does not fit|does not fit (u32|i32) \(WGSL refuses"
)


def inputs(seed: int) -> tuple[dict, dict]:
    rng = np.random.default_rng(seed)
    inp = rng.integers(0, 2**32, 2 * N, dtype=np.uint64).astype(np.uint32)
    pick = rng.random(2 * N) < 0.4  # edge values in 40% of the words
    inp[pick] = rng.choice(EDGES, int(pick.sum()))
    out = np.full(N * SLOTS, POISON, np.uint32)
    return {"inp": inp, "out": out}, {"n": int(rng.choice(EDGES))}


def fuzz_settings(ci: int) -> settings:
    """The generated kernels' hypothesis settings: ``ci`` examples (:func:`examples`)."""
    return settings(
        examples(ci),
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.filter_too_much,
            HealthCheck.function_scoped_fixture,
        ],
    )


def avoiding(deviations: dict) -> dict:
    """The generator's switches for an adapter with ``deviations``: on one known to run a
    signed % (or an i32 abs) wrong, the kernels hold none (the operator pairs' test,
    :func:`test_an_i32_abs_of_the_least_value` and docs/deviations.md show those); everywhere
    else they hold many."""
    return {
        "signed_mod": "i32 %" not in deviations,
        "signed_abs": not {"i32 max(a, abs(b))", "i32 abs never negative"} & set(deviations),
    }


def assume_portable(k: Kernel, deviations: dict) -> None:
    """Skip a kernel holding a shape the adapter is known to run wrong that the generator does
    not steer clear of (on NVIDIA a bool select over its own condition and a division by a
    select of constant vectors, shown by :func:`test_a_bool_select_over_its_own_condition`
    and :func:`test_a_division_by_a_select_of_constant_vectors`)."""
    if "select(a && c, b || c, c)" in deviations:
        assume(not any(type(n) is Call and select_of_its_condition(n) for n in walk(k)))
    if "division by a select of constant vectors" in deviations:
        assume(SELECT_DIVISOR not in {why for _, why in hazards(k)})


def outputs(k: Kernel, buffers: dict, params: dict) -> tuple[np.ndarray, np.ndarray]:
    """``out`` from the interpreter and from the GPU; a kernel naga or Tint refuses for a
    constant it folds is skipped. naga and Tint fold every constant sub-expression, the
    generator's random ones included; the verifier folds scalars, vectors of constants and
    integer operators, selects on a literal, min/max/abs/clamp and conversions on them
    (tests/ir/test_constant_operands.py holds its verdicts to Tint's), not what reads a var or a
    let: those refusals are the compilers'. (An integer ``+``, ``-``, ``*`` or negation of
    constants past its type's range wraps in all four: the last test below.)"""
    from kvdsl.runtime import CompileError, run

    want = interp_run(k, buffers, params, (GROUPS, 1, 1))["out"]
    try:
        return want, run(k, buffers, params, (GROUPS, 1, 1))["out"]
    except CompileError as err:
        assume(not COMPILER_FOLDING.search(str(err)))
        raise
