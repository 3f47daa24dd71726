"""Nesting and expression sizes past what WGSL compilers take, refused before parsing.

kvdsl's parser, IR builder and interpreter recurse through an expression, so a deep enough
one would end in Python's recursion limit (or its C stack) with no location. Tint stops first:
at a bracket nesting of 128 (``()``, ``[]`` and ``{}`` together: "maximum parser recursive
depth reached") and at an expression depth of 512 ("reached max expression depth of 512").
kvdsl refuses the first as Tint does, in Tint's words, at the token after the bracket that
reaches it (where Tint stops), and counts the second by operators: an expression (what lies between ``;``, ``{`` and ``}``) of more than
:data:`MAX_OPERATORS` operators is refused at the one past it. A chain ``a + a + ... + a`` of
N operators is N deep, so kvdsl takes what Tint takes of it; an expression of more operators
but less depth (``a * b + c * d + ...``), which Tint and naga take, kvdsl refuses.

A refusal here is a :class:`TooDeep`: text no WGSL compiler should be handed either (naga's
parser recurses without a limit, and 10,000 nested parentheses end it in a crash).
"""

from __future__ import annotations

import re

from kvdsl.frontend.errors import WgslSyntaxError, position, template_lists

#: Tint's parser depth: brackets nested this deep are refused.
MAX_NESTING = 128
#: The operators one expression may hold (Tint's expression depth).
MAX_OPERATORS = 512

_TOKEN = re.compile(
    r"[A-Za-z_0-9.]+|->|\+\+|--|&&|\|\||<<=?|>>=?|[-+*/%&|^<>!=]=|[-+*/%&|^!~<>]|[()\[\]{};]"
)
_OPERATOR = re.compile(r"&&|\|\||<<|>>|[-+*/%&|^!~<>]|[<>!=]=")
_NEXT = re.compile(r"\S")


class TooDeep(WgslSyntaxError):
    """Brackets or an expression past what WGSL compilers take: refused before parsing, and
    never handed to naga or Tint."""


def check_depth(code: str, filename: str) -> None:
    """Raise :class:`WgslSyntaxError` at the first bracket nested :data:`MAX_NESTING` deep, or
    at the first operator past :data:`MAX_OPERATORS` in one expression (``code``: the source
    with its comments blanked out)."""
    if code.count("(") + code.count("[") + code.count("{") < MAX_NESTING and (
        sum(code.count(c) for c in "+-*/%&|^!~<>=") <= MAX_OPERATORS
    ):
        return  # neither limit can be reached: the common case costs two counts
    brackets = {gt for _, lt, gt in template_lists(code)} | {
        lt for _, lt, gt in template_lists(code)
    }
    depth = operators = 0
    for m in _TOKEN.finditer(code):
        t = m.group()
        if t in "([{" and len(t) == 1:
            depth += 1
            if depth >= MAX_NESTING:  # Tint stops at what follows the bracket
                at = _NEXT.search(code, m.end())
                where, token = (m.start(), t) if at is None else (at.start(), at.group())
                _refuse(code, where, filename, "maximum parser recursive depth reached", token)
        elif t in ")]}" and len(t) == 1:
            depth = max(0, depth - 1)
        if t in ";{}":
            operators = 0
        elif _OPERATOR.fullmatch(t) and m.start() not in brackets:
            operators += 1
            if operators > MAX_OPERATORS:
                _refuse(
                    code,
                    m.start(),
                    filename,
                    f"more than {MAX_OPERATORS} operators in one expression (Tint stops at "
                    f"expression depth {MAX_OPERATORS}: 'reached max expression depth of "
                    f"{MAX_OPERATORS}')",
                    t,
                )


def _refuse(code: str, offset: int, filename: str, message: str, token: str) -> None:
    line, column = position(code, offset)
    raise TooDeep(message, filename, line, column, token, ())
