"""The contract's expression language: what a binding's element count or a dispatch's item count
is, as text both Python and JavaScript evaluate exactly.

Grammar (whitespace between tokens is free)::

    expr   := term (("+" | "-") term)*
    term   := factor ("*" factor)*
    factor := INTEGER | NAME | "(" expr ")"

``INTEGER`` is a run of decimal digits; ``NAME`` is a shape variable (element counts) or a params
field (dispatch items): a letter or ``_`` followed by letters, digits or ``_``. Arithmetic is on
unbounded integers. :func:`evaluate` here and ``evaluate`` in ``emitted/kvdsl.js`` are the two
implementations; tests hold them to each other.
"""

from __future__ import annotations

import re
from typing import Mapping

_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_]*)|([-+*()]))")


class ExprError(ValueError):
    """An expression outside the language, or a name it needs that was not given."""


def tokens(text: str) -> list[str]:
    """The tokens of ``text``; :class:`ExprError` at the first character outside the language."""
    out, pos, end = [], 0, len(text.rstrip())
    while pos < end:
        m = _TOKEN.match(text, pos)
        if m is None:
            at = len(text) - len(text[pos:].lstrip())
            raise ExprError(
                f"expression {text!r}: {text[at]!r} at {at} is not an integer, a name, '+', "
                "'-', '*' or a parenthesis"
            )
        out.append(m.group(m.lastindex))
        pos = m.end()
    return out


def evaluate(text: str, values: Mapping[str, int], what: str = "variable") -> int:
    """``text``'s value with each name read from ``values`` (``what`` names them in errors)."""
    toks = tokens(text)
    pos = 0

    def peek() -> str | None:
        return toks[pos] if pos < len(toks) else None

    def take() -> str:
        nonlocal pos
        if pos >= len(toks):
            raise ExprError(f"expression {text!r} ends early")
        pos += 1
        return toks[pos - 1]

    def factor() -> int:
        tok = take()
        if tok == "(":
            v = expr()
            if take() != ")":
                raise ExprError(f"expression {text!r}: expected ')'")
            return v
        if tok.isdigit():
            return int(tok)
        if tok[0].isalpha() or tok[0] == "_":
            if tok not in values:
                known = ", ".join(sorted(values)) or "none"
                raise ExprError(f"{what} '{tok}' is missing (needed by {text}); given: {known}")
            return int(values[tok])
        raise ExprError(f"expression {text!r}: unexpected {tok!r}")

    def term() -> int:
        v = factor()
        while peek() == "*":
            take()
            v *= factor()
        return v

    def expr() -> int:
        v = term()
        while peek() in ("+", "-"):
            v = v + term() if take() == "+" else v - term()
        return v

    value = expr()
    if pos != len(toks):
        raise ExprError(f"expression {text!r}: unexpected {toks[pos]!r} after a whole expression")
    return value


def names(text: str) -> set[str]:
    """The names ``text`` reads."""
    return {t for t in tokens(text) if t[0].isalpha() or t[0] == "_"}


def product(*factors: str | int) -> str:
    """The text of the product of ``factors``, 1s dropped, sums parenthesised."""
    parts = [str(f) for f in factors if str(f) != "1"]
    if len(parts) > 1:
        parts = [f"({s})" if is_sum(s) else s for s in parts]
    return " * ".join(parts) or "1"


def is_sum(text: str) -> bool:
    """Whether ``text`` has a ``+`` or ``-`` outside parentheses (a factor needs them)."""
    depth = 0
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        if depth == 0 and ch in "+-":
            return True
    return False
