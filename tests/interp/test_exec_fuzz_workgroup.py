"""Generated kernels that share workgroup memory, on the GPU and in the interpreter: the same bits.

The K RMSNorm kernels sum each row across a workgroup through ``var<workgroup>`` memory between
``workgroupBarrier()``\\ s; the interpreter runs every invocation of a workgroup at once and must
order their reads and writes as the barriers do. Here the integer statements and expressions of
``tests/interp/test_exec_fuzz.py`` (no early ``return``, which would leave a later barrier out of
uniform control flow) are cut into phases. In each phase every invocation writes one slot of a
workgroup array, chosen by a permutation of its local id (itself, its mirror, an xor, a rotation,
an odd multiple), all invocations pass a barrier, then each reads slots chosen by any integer
expression (modulo the array's length) into its variables, and passes a second barrier before the
next phase writes. Some phases are a tree reduction instead (``+``, ``^``, ``|``, ``min`` or ``max``
of each pair, the stride halving, a barrier each step), some (on an adapter with subgroups) a
``subgroupShuffleXor`` by a mask of 1 to 3, and phases may sit in a uniform loop. The
variables then go out as in the integer kernels, poisoned first. No two invocations write one
slot between barriers and no slot is read before it is written, so the interpreter's race and
initialisation checks stay quiet: a read it ordered wrongly shows as a bit that differs.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from kvdsl.emit import emit
from kvdsl.ir.tree import (
    Assign,
    Barrier,
    Binary,
    Call,
    For,
    If,
    Index,
    Lit,
    Member,
    Name,
    Var,
    WorkgroupVar,
)
from kvdsl.ir.ops import Op
from kvdsl.ir.types import Array, bool_, u32
from tests.helpers.exec_fuzz import (
    EPILOGUE,
    PRELUDE,
    RETURNS,
    SIGNED_ABS,
    SIGNED_MOD,
    WG,
    WRITE,
    as_word,
    assume_portable,
    avoiding,
    expr,
    fuzz_settings,
    inputs,
    outputs,
    stmts,
    verified_kernel,
)
from tests.helpers.features import suite_feature
from tests.helpers.roundtrip import Fresh, assert_round_trip

LID = Member(Name("lid"), "x")
#: A key of the scope that is no type: whether phases across the subgroup may be drawn.
SHUFFLES = "shuffles"
REDUCE = (Op.ADD, Op.XOR, Op.OR, Op.MIN, Op.MAX)


def u(v: int) -> Lit:
    return Lit(v, u32)


@st.composite
def permutation(draw):
    """A slot for this invocation's write: a permutation of the local ids 0..WG-1."""
    k = draw(st.integers(1, WG - 1))
    match draw(st.sampled_from(["id", "mirror", "xor", "rotate", "odd"])):
        case "id":
            return LID
        case "mirror":
            return Binary(Op.SUB, u(WG - 1), LID)
        case "xor":
            return Binary(Op.XOR, LID, u(k))
        case "rotate":
            return Binary(Op.MOD, Binary(Op.ADD, LID, u(k)), u(WG))
        case "odd":  # an odd multiplier permutes the residues of a power of two
            return Binary(Op.MOD, Binary(Op.MUL, LID, u(2 * (k % (WG // 2)) + 1)), u(WG))
    raise AssertionError


def combine(op: Op, a, b):
    return Call(op, (a, b)) if op in (Op.MIN, Op.MAX) else Binary(op, a, b)


@st.composite
def exchange(draw, scope: dict) -> tuple:
    """One phase: every invocation writes its slot, a barrier, reads of any slots into the
    variables, a barrier."""
    ty = draw(st.sampled_from(list(WRITE)))
    out = [Assign(Index(Name("tile"), draw(permutation())), as_word(draw(expr(ty, 2, scope)), ty))]
    out.append(Barrier())
    for _ in range(draw(st.integers(1, 3))):
        at = Binary(Op.MOD, draw(expr(u32, 2, scope)), u(WG))
        read = Index(Name("tile"), at)
        op = draw(st.sampled_from([Op.ADD, Op.XOR, None]))
        out.append(Assign(Name("vu"), read, op))
    out.append(Barrier())
    return tuple(out)


@st.composite
def reduction(draw, fresh: Fresh, scope: dict) -> tuple:
    """One phase: a tree reduction of every invocation's value; the total joins ``vu``."""
    op = draw(st.sampled_from(REDUCE))
    stride = fresh("stride")
    here, there = Index(Name("tile"), LID), Index(Name("tile"), Binary(Op.ADD, LID, Name(stride)))
    step = (If(Binary(Op.LT, LID, Name(stride)), (Assign(here, combine(op, here, there)),)),)
    return (
        Assign(here, as_word(draw(expr(u32, 2, scope)), u32)),
        Barrier(),
        For(
            Var(stride, u32, u(WG // 2)),
            Binary(Op.GT, Name(stride), u(0)),
            Assign(Name(stride), u(1), Op.SHR),
            step + (Barrier(),),
        ),
        Assign(Name("vu"), Index(Name("tile"), u(0)), Op.XOR),  # the total
        Barrier(),
    )


@st.composite
def shuffle(draw, scope: dict) -> tuple:
    """One phase across the subgroup: a variable takes (or is combined with) another lane's
    value of an expression, the lane ``id ^ mask`` for a mask of 1 to 3 (every subgroup holds 4
    lanes or more, so the partner is the same one whatever the adapter's subgroup size)."""
    ty = draw(st.sampled_from(list(WRITE)))
    if ty == bool_:  # a shuffle takes numbers: a bool goes as a u32 and comes back
        value = Call(Op.SELECT, (u(0), u(1), draw(expr(bool_, 2, scope))))
        moved = Call(Op.SUBGROUP_SHUFFLE_XOR, (value, u(draw(st.integers(1, 3)))))
        return (Assign(Name("vb"), Binary(Op.NE, moved, u(0))),)
    moved = Call(Op.SUBGROUP_SHUFFLE_XOR, (draw(expr(ty, 2, scope)), u(draw(st.integers(1, 3)))))
    return (Assign(Name(WRITE[ty]), moved, draw(st.sampled_from([None, Op.ADD, Op.XOR]))),)


@st.composite
def phases(draw, fresh: Fresh, depth: int, scope: dict) -> tuple:
    """Phases, each after some per-invocation statements; maybe in a uniform loop."""
    out: list = []
    for _ in range(draw(st.integers(1, 3))):
        out += draw(stmts(fresh, 1, None, scope))
        kinds = ["exchange", "exchange", "reduction"] + ["loop"] * depth
        kind = draw(st.sampled_from(kinds + ["shuffle"] * scope[SHUFFLES]))
        if kind == "exchange":
            out += draw(exchange(scope))
        elif kind == "reduction":
            out += draw(reduction(fresh, scope))
        elif kind == "shuffle":
            out += draw(shuffle(scope))
        else:
            i = fresh("i")
            body = draw(phases(fresh, depth - 1, scope))
            cond = Binary(Op.LT, Name(i), u(draw(st.integers(1, 3))))
            out.append(For(Var(i, u32, u(0)), cond, Assign(Name(i), u(1), Op.ADD), body))
    return tuple(out)


@st.composite
def kernels(draw, signed_mod: bool = True, signed_abs: bool = True, shuffles: bool = True):
    """A verified kernel of phases over workgroup memory (and, with ``shuffles``, across the
    subgroup)."""
    scope = {SIGNED_MOD: signed_mod, SIGNED_ABS: signed_abs, RETURNS: False, SHUFFLES: shuffles}
    body = PRELUDE + draw(phases(Fresh(), 1, scope))
    if shuffles:  # one shuffle whose result reaches the outputs, whatever the phases drew
        mixed = Binary(Op.XOR, Name("vu"), Name("x"))
        mask = u(draw(st.integers(1, 3)))
        body += (Assign(Name("vu"), Call(Op.SUBGROUP_SHUFFLE_XOR, (mixed, mask)), Op.XOR),)
    body += EPILOGUE
    return verified_kernel(
        "gen_shared",
        body,
        builtins=(("gid", "global_invocation_id"), ("lid", "local_invocation_id")),
        workgroup_vars=(WorkgroupVar("tile", Array(u32, WG)),),
    )


@fuzz_settings(60)
@given(data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_workgroup_kernels_agree_on_gpu_and_interpreter(gpu, deviations, data, seed: int) -> None:
    k = data.draw(
        kernels(**avoiding(deviations), shuffles=suite_feature(gpu, "subgroups")), label="k"
    )
    assert_round_trip(k)
    assume_portable(k, deviations)
    want, got = outputs(k, *inputs(seed))
    bad = np.flatnonzero(got != want)
    assert not bad.size, (
        f"{bad.size} words differ; first: word {bad[0]}: GPU {got[bad[0]]:#x}, "
        f"interpreter {want[bad[0]]:#x}\n{emit(k)}"
    )
