"""WGSL's behaviour analysis of statements: how control can leave one (next, break, continue,
return), and what WGSL refuses by it: a loop that never exits, a ``return`` in a continuing
block, a ``break`` or ``continue`` that would leave one. The verifier applies the refusals;
the uniformity analysis (:mod:`kvdsl.ir.uniformity`) reads the behaviours.
"""

from __future__ import annotations

from kvdsl.ir import tree as ir
from kvdsl.ir.scope import VerifyError

NEXT, BREAK, CONTINUE, RETURN = "next", "break", "continue", "return"
NEXT_ONLY = frozenset((NEXT,))
NEVER_EXITS = (
    "the loop never exits: no break or return is reached in it (WGSL's behaviour analysis; "
    "Tint refuses it)"
)


def behavior(body: tuple[ir.Stmt, ...]) -> frozenset[str]:
    """WGSL's behaviour analysis of a statement sequence: how control can leave it (next,
    break, continue, return). A statement after one that cannot go on adds nothing."""
    out = NEXT_ONLY
    for s in body:
        if NEXT not in out:
            break
        b = statement_behavior(s)
        if b is not NEXT_ONLY:
            out = (out - {NEXT}) | b
    return out


def statement_behavior(s: ir.Stmt) -> frozenset[str]:
    """The behaviour of one statement (lets, vars, assignments, comments and barriers: next)."""
    t = type(s)
    if t is ir.Break:
        return frozenset((BREAK,))
    if t is ir.Continue:
        return frozenset((CONTINUE,))
    if t is ir.Return:
        return frozenset((RETURN,))
    if t is ir.If:
        return behavior(s.then) | (behavior(s.orelse) if s.orelse else NEXT_ONLY)
    if t is ir.Block:
        return behavior(s.body)
    if t is ir.For:
        return loop_behavior(s.body, s.cond is not None)
    if t is ir.Loop:
        return loop_behavior(s.body + s.continuing, s.break_if is not None)
    if t is ir.Switch:
        return switch_behavior(s)
    return NEXT_ONLY


def switch_behavior(s: ir.Switch) -> frozenset[str]:
    """A switch's behaviour: its clauses' together, a ``break`` (which leaves the switch) as
    next."""
    b = frozenset().union(*(behavior(c.body) for c in s.cases))
    return (b - {BREAK}) | {NEXT} if BREAK in b else b


def loop_behavior(body: tuple[ir.Stmt, ...], has_cond: bool) -> frozenset[str]:
    """A loop's behaviour: a condition (a `for` with one) is a break; without any break it
    only leaves by return, and with neither it never leaves (the empty set)."""
    b = body_behavior(body, has_cond)
    if BREAK in b:
        return (b - {BREAK, CONTINUE}) | {NEXT}
    return b - {CONTINUE, NEXT}


def body_behavior(body: tuple[ir.Stmt, ...], has_cond: bool) -> frozenset[str]:
    """The behaviour of a loop's body, its condition's ``if !(cond) { break; }`` first."""
    b = behavior(body)
    return b | {BREAK} if has_cond else b


def continuing_exits(body: tuple[ir.Stmt, ...]) -> None:
    """WGSL refuses a ``return`` in a continuing block, and a ``break`` or ``continue`` that
    would leave it (one in a loop, or a break in a switch, nested in it is fine)."""
    for s in body:
        t = type(s)
        if t is ir.Return:
            raise VerifyError("return in a continuing block (WGSL refuses it)")
        if t is ir.Break or t is ir.Continue:
            raise VerifyError(
                f"{t.__name__.lower()} in a continuing block (WGSL refuses it; use break if)"
            )
        if t is ir.If:
            continuing_exits(s.then)
            continuing_exits(s.orelse)
        elif t is ir.Block:
            continuing_exits(s.body)
        elif t is ir.Switch:
            for case in s.cases:
                _no_return(case.body)
        elif t is ir.For or t is ir.Loop:
            _no_return(s.body)


def _no_return(body: tuple[ir.Stmt, ...]) -> None:
    for x in ir.walk(body):
        if type(x) is ir.Return:
            raise VerifyError("return in a continuing block (WGSL refuses it)")
