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
from kvdsl.ir import tree as ir
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
    u32: [
        ir.Name("x"),
        ir.Name("vu"),
        ir.Name("z"),
        ir.Member(ir.Name("params"), "n"),
        ir.Member(ir.Name("gid"), "x"),
    ],
    i32: [ir.Name("y"), ir.Name("vi"), ir.Name("zi"), ir.Name("m")],
    bool_: [ir.Name("vb")],
    V2U: [ir.Name("v2"), ir.Member(ir.Name("gid"), "xy")],
    V2I: [ir.Name("w2")],
}
WRITE = {u32: "vu", i32: "vi", bool_: "vb", V2U: "v2", V2I: "w2"}
ARITH = (Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.MOD)
BITS = (Op.AND, Op.OR, Op.XOR)
COMPARE = (Op.LT, Op.LE, Op.GT, Op.GE, Op.EQ, Op.NE)
EDGES = np.array([0, 1, 2, 31, 32, 33, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0xFFFFFFFE], np.uint32)


def _lit(draw, ty):
    if isinstance(ty, Vec):
        return ir.Construct(ty, (draw(literals(ty.elem)), draw(literals(ty.elem))))
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
            return ir.Binary(op, draw(sub(ty)), draw(sub(ty)))
        case "divide":
            # A divisor that may be 0 at run time (WGSL: x / 0 == x, x % 0 == 0), or any
            # expression: a constant 0 is refused when WGSL compiles, and skipped below.
            op = draw(st.sampled_from(_divisions(ty, scope)))
            by = draw(st.one_of(st.sampled_from(names), sub(ty)) if names else sub(ty))
            return ir.Binary(op, draw(sub(ty)), by)
        case "divide_min":  # i32's least value over -1 is that value (and % gives 0)
            op = draw(st.sampled_from(_divisions(ty, scope)))
            return ir.Binary(op, draw(sub(ty)), ir.Lit(-1, i32))
        case "vec_scalar":
            op = draw(st.sampled_from(ARITH))  # WGSL mixes a scalar and a vector in these only
            if op not in _divisions(ty, scope) + [Op.ADD, Op.SUB, Op.MUL]:
                op = Op.DIV
            a, b = draw(sub(ty)), draw(sub(ty.elem))
            return ir.Binary(op, a, b) if draw(st.booleans()) else ir.Binary(op, b, a)
        case "bits" | "boolbits":
            ops_ = BITS[:2] if ty == bool_ else BITS  # a bool has & and |, no ^
            return ir.Binary(draw(st.sampled_from(ops_)), draw(sub(ty)), draw(sub(ty)))
        case "shift":
            # A run-time amount is taken modulo 32 (WGSL); a constant one must be under 32.
            amount = V2U if isinstance(ty, Vec) else u32
            runtime = _names(amount, scope)
            by = draw(st.one_of(st.sampled_from(runtime), sub(amount)) if runtime else sub(amount))
            return ir.Binary(draw(st.sampled_from([Op.SHL, Op.SHR])), draw(sub(ty)), by)
        case "bitnot":
            return ir.Unary(Op.BITNOT, draw(sub(ty)))
        case "neg":
            x = draw(sub(ty))  # "-(3i)" would print as the literal -3i: not this IR
            return ir.Unary(Op.NEG, x if not isinstance(x, ir.Lit) else ir.Convert(ty, x))
        case "abs":
            return ir.Call(Op.ABS, (draw(sub(ty)),))
        case "minmax":
            op = draw(st.sampled_from([Op.MIN, Op.MAX, Op.CLAMP]))
            args = tuple(draw(sub(ty)) for _ in range(ops.info(op).arity))
            if op is Op.CLAMP:  # bounds in order (SPIR-V's clamp leaves low > high undefined)
                lo, hi = args[1:]
                args = (args[0], ir.Call(Op.MIN, (lo, hi)), ir.Call(Op.MAX, (lo, hi)))
            return ir.Call(op, args)
        case "select":
            return ir.Call(Op.SELECT, (draw(sub(ty)), draw(sub(ty)), draw(sub(bool_))))
        case "compare":
            t = draw(st.sampled_from([u32, i32]))
            return ir.Binary(draw(st.sampled_from(COMPARE)), draw(sub(t)), draw(sub(t)))
        case "logic":
            return ir.Binary(
                draw(st.sampled_from([Op.LAND, Op.LOR])), draw(sub(bool_)), draw(sub(bool_))
            )
        case "not":
            return ir.Unary(Op.NOT, draw(sub(bool_)))
        case "convert":
            if isinstance(ty, Vec):  # between vec2<u32> and vec2<i32> WGSL keeps the bits
                return ir.Convert(ty, draw(sub(V2I if ty == V2U else V2U)))
            src = draw(st.sampled_from([t for t in (u32, i32, bool_) if t != ty]))
            return ir.Convert(ty, draw(sub(src)))
        case "swizzle":
            return ir.Member(draw(sub(V2U if ty == u32 else V2I)), draw(st.sampled_from("xy")))
        case "swizzle2":
            return ir.Member(draw(sub(ty)), draw(st.sampled_from(["yx", "xx", "yy"])))
        case "call":  # a helper function, maybe under a mask (an if, a loop, a select's arm)
            f = draw(st.sampled_from(callable_))
            return ir.FnCall(f.name, tuple(draw(sub(t)) for _, t in f.params))
        case "construct":
            return ir.Construct(ty, (draw(sub(ty.elem)), draw(sub(ty.elem))))
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
def helper(draw, fresh: Fresh, name: str, params: tuple, ret, scope: dict) -> ir.Function:
    """A helper over its parameters: lets, a loop accumulating into a var (which may break),
    an early return under a condition, and a last return; it may call the helpers in
    ``scope``'s :data:`HELPERS` (those before it)."""
    scope = {k: v for k, v in scope.items() if not isinstance(k, (Scalar, Vec))}
    scope[IN_HELPER] = True
    for pname, pty in params:
        scope[pty] = scope.get(pty, []) + [ir.Name(pname)]
    body: list = []
    for _ in range(draw(st.integers(0, 2))):
        ty = draw(st.sampled_from([u32, i32, V2U]))
        t = fresh("l")
        body.append(ir.Let(t, draw(expr(ty, 2, scope))))
        scope[ty] = scope.get(ty, []) + [ir.Name(t)]
    acc, i = fresh("acc"), fresh("k")
    body.append(ir.Var(acc, ret, draw(expr(ret, 2, scope))))
    scope[ret] = scope.get(ret, []) + [ir.Name(acc)]
    inner = scope | {u32: scope.get(u32, []) + [ir.Name(i)]}
    op = draw(st.sampled_from([None, Op.ADD, Op.XOR]))
    step: tuple = (ir.Assign(ir.Name(acc), draw(expr(ret, 2, inner)), op),)
    if draw(st.booleans()):
        step = (ir.If(draw(expr(bool_, 2, inner)), (ir.Break(),)),) + step
    trips = ir.Lit(draw(st.integers(0, 3)), u32)
    body += [
        ir.For(
            ir.Var(i, u32, ir.Lit(0, u32)),
            ir.Binary(Op.LT, ir.Name(i), trips),
            ir.Assign(ir.Name(i), ir.Lit(1, u32), Op.ADD),
            step,
        ),
        ir.If(draw(expr(bool_, 2, scope)), (ir.Return(draw(expr(ret, 2, scope))),)),
        ir.Return(draw(expr(ret, 2, scope))),
    ]
    return ir.Function(name, params, ret, tuple(body))


def _divisions(ty, scope: dict) -> list[Op]:
    """The division operators to draw for ``ty`` in ``scope``."""
    return [Op.DIV] if ty in SIGNED and not scope.get(SIGNED_MOD, True) else [Op.DIV, Op.MOD]


def slot(j: int) -> ir.Index:
    """This invocation's output word ``j``."""
    at = ir.Binary(
        Op.ADD,
        ir.Binary(Op.MUL, ir.Member(ir.Name("gid"), "x"), ir.Lit(SLOTS, u32)),
        ir.Lit(j, u32),
    )
    return ir.Index(ir.Name("out"), at)


def as_word(e, ty):
    """``e`` of ``ty`` as one u32 word (a vec2 as its components' xor with y rotated)."""
    if ty == u32:
        return e
    if ty == i32:
        return ir.Convert(u32, e)
    if ty == bool_:
        return ir.Call(Op.SELECT, (ir.Lit(7, u32), ir.Lit(9, u32), e))
    if ty == V2I:
        e = ir.Convert(V2U, e)
    y = ir.Member(e, "y")
    rot = ir.Binary(
        Op.OR, ir.Binary(Op.SHL, y, ir.Lit(16, u32)), ir.Binary(Op.SHR, y, ir.Lit(16, u32))
    )
    return ir.Binary(Op.XOR, ir.Member(e, "x"), rot)


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
                out.append(ir.Let(name, draw(e(ty))))
                scope.setdefault(ty, []).append(ir.Name(name))
            case "assign":
                ty = draw(st.sampled_from(TYPES))
                out.append(ir.Assign(ir.Name(WRITE[ty]), draw(e(ty))))
            case "compound":
                ty = draw(st.sampled_from([u32, i32, V2U, V2I]))
                ops_ = ARITH + BITS + (Op.SHL, Op.SHR)
                if Op.MOD not in _divisions(ty, scope):
                    ops_ = tuple(o for o in ops_ if o is not Op.MOD)
                op = draw(st.sampled_from(ops_))
                by = ty
                if op in (Op.SHL, Op.SHR):  # a shift's amount is unsigned
                    by = V2U if isinstance(ty, Vec) else u32
                out.append(ir.Assign(ir.Name(WRITE[ty]), draw(e(by)), op))
            case "store":
                ty = draw(st.sampled_from(TYPES))
                out.append(
                    ir.Assign(slot(draw(st.integers(5, SLOTS - 1))), as_word(draw(e(ty)), ty))
                )
            case "if":
                then = draw(stmts(fresh, depth - 1, in_loop, scope))
                orelse = draw(st.one_of(st.just(()), stmts(fresh, depth - 1, in_loop, scope)))
                out.append(ir.If(draw(e(bool_)), then, orelse))
            case "for":
                i = fresh("i")
                trips = draw(st.integers(0, 4))
                body = draw(
                    stmts(fresh, depth - 1, "for", scope | {u32: scope.get(u32, []) + [ir.Name(i)]})
                )
                cond = ir.Binary(Op.LT, ir.Name(i), ir.Lit(trips, u32))
                out.append(
                    ir.For(
                        ir.Var(i, u32, ir.Lit(0, u32)),
                        cond,
                        ir.Assign(ir.Name(i), ir.Lit(1, u32), Op.ADD),
                        body,
                    )
                )
            case "loop":
                body = draw(stmts(fresh, depth - 1, "loop", scope))
                out.append(ir.Loop((ir.If(draw(e(bool_)), (ir.Break(),)),) + body + (ir.Break(),)))
            case "block":
                inner = draw(stmts(fresh, depth - 1, in_loop, scope))
                if draw(st.integers(0, 2)) == 0:
                    # A var of an outer var's name, to the block's end: what the block assigns
                    # goes to it, and the outer one is itself again after the block.
                    ty = draw(st.sampled_from(TYPES))
                    inner = (ir.Var(WRITE[ty], ty, draw(e(ty))),) + inner
                out.append(ir.Block(inner))
            case "break":
                out.append(ir.Break())
            case "continue":
                out.append(ir.Continue())
            case "return":
                out.append(ir.If(draw(e(bool_)), (ir.Return(),)))
    return tuple(out)


PRELUDE = (
    ir.Let("x", ir.Index(ir.Name("inp"), ir.Member(ir.Name("gid"), "x"))),
    ir.Let(
        "y",
        ir.Convert(
            i32,
            ir.Index(
                ir.Name("inp"), ir.Binary(Op.ADD, ir.Member(ir.Name("gid"), "x"), ir.Lit(N, u32))
            ),
        ),
    ),
    # 0 or 1, and 0 or -1, by invocation: divisors that are zero (or -1) at run time.
    ir.Let("z", ir.Binary(Op.AND, ir.Binary(Op.SHR, ir.Name("x"), ir.Lit(3, u32)), ir.Lit(1, u32))),
    ir.Let(
        "zi",
        ir.Binary(
            Op.SUB,
            ir.Convert(
                i32,
                ir.Binary(Op.AND, ir.Binary(Op.SHR, ir.Name("x"), ir.Lit(4, u32)), ir.Lit(1, u32)),
            ),
            ir.Lit(1, i32),
        ),
    ),
    # i32's least value in half the invocations (negated, abs'd or divided by -1 it stays).
    ir.Let(
        "m",
        ir.Call(
            Op.SELECT,
            (
                ir.Name("y"),
                ir.Convert(i32, ir.Lit(2**31, u32)),
                ir.Binary(Op.EQ, ir.Name("z"), ir.Lit(0, u32)),
            ),
        ),
    ),
    ir.Var("vu", u32, ir.Binary(Op.XOR, ir.Name("x"), ir.Member(ir.Name("params"), "n"))),
    ir.Var("vi", i32, ir.Name("y")),
    ir.Var(
        "vb",
        bool_,
        ir.Binary(Op.EQ, ir.Binary(Op.AND, ir.Name("x"), ir.Lit(1, u32)), ir.Lit(0, u32)),
    ),
    ir.Var("v2", V2U, ir.Construct(V2U, (ir.Name("x"), ir.Member(ir.Name("params"), "n")))),
    ir.Var("w2", V2I, ir.Construct(V2I, (ir.Name("y"), ir.Name("m")))),
)
EPILOGUE = tuple(ir.Assign(slot(j), as_word(ir.Name(WRITE[ty]), ty)) for j, ty in enumerate(TYPES))


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
            ir.Assign(ir.Name("vu"), ir.FnCall("h0", (ir.Name("x"), ir.Name("y"))), Op.XOR),
            ir.Assign(
                ir.Name("vi"),
                ir.FnCall("h1", (ir.Name("v2"), ir.Name("vb"), ir.Name("vu"))),
                Op.XOR,
            ),
        )
    body += EPILOGUE
    return verified_kernel("gen_int", body, functions=functions)


def kernel_of(name: str, bindings: tuple, body: tuple, params=None, **fields) -> ir.Kernel:
    """The kernel ``name`` of ``bindings`` and ``params`` running ``body`` in ``WG`` invocations a
    workgroup, ``gid`` each one's global invocation id, without consts; ``fields`` are further
    ``Kernel`` fields (functions, builtins, workgroup variables)."""
    return ir.Kernel(
        name=name,
        bindings=bindings,
        params=params,
        consts=(),
        functions=fields.pop("functions", ()),
        workgroup_size=(WG, 1, 1),
        builtins=fields.pop("builtins", (("gid", "global_invocation_id"),)),
        body=body,
        **fields,
    )


def verified_kernel(name: str, body: tuple, **fields) -> ir.Kernel:
    """The generated kernel ``name`` over ``inp`` and ``out`` (u32, ``params.n`` of them) with
    ``body``, verified; one the verifier refuses for a constant WGSL refuses is no kernel
    (hypothesis draws again). ``fields`` are further ``Kernel`` fields (functions, builtins,
    workgroup variables)."""
    bindings = (ir.Binding("inp", u32, "read"), ir.Binding("out", u32, "read_write"))
    k = kernel_of(name, bindings, body, Struct("Params", (("n", u32),)), **fields)
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


def assume_portable(k: ir.Kernel, deviations: dict) -> None:
    """Skip a kernel holding a shape the adapter is known to run wrong that the generator does
    not steer clear of (on NVIDIA a bool select over its own condition and a division by a
    select of constant vectors, shown by :func:`test_a_bool_select_over_its_own_condition`
    and :func:`test_a_division_by_a_select_of_constant_vectors`)."""
    if "select(a && c, b || c, c)" in deviations:
        assume(not any(type(n) is ir.Call and select_of_its_condition(n) for n in ir.walk(k)))
    if "division by a select of constant vectors" in deviations:
        assume(SELECT_DIVISOR not in {why for _, why in hazards(k)})


def outputs(k: ir.Kernel, buffers: dict, params: dict) -> tuple[np.ndarray, np.ndarray]:
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
