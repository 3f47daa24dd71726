"""Find the ``//`` comments of WGSL source, which the grammar skips but the IR keeps.

An own-line comment (only whitespace before it) inside a function body becomes a
:class:`~kvdsl.ir.nodes.Comment` statement; own-line comments directly above a module ``const``
become its ``comment``, and those directly above ``@compute`` the kernel's ``doc``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Matched left to right, so a "//" inside a block comment (or "/*" inside a line comment) is
# part of that comment. Block comments do not nest (a difference from WGSL, see docs/grammar.md).
_COMMENT = re.compile(r"//[^\n]*|/\*[\s\S]*?\*/")


@dataclass(frozen=True, slots=True)
class LineComment:
    line: int
    text: str  # without the "//" and one following space, trailing blanks removed
    own_line: bool


def scan(text: str) -> tuple[list[LineComment], str]:
    """The line comments of ``text``, and ``text`` with every comment blanked out.

    Blanking keeps newlines, so offsets, lines and columns in the blanked text match the source.
    """
    found: list[LineComment] = []
    parts: list[str] = []
    last = 0
    for m in _COMMENT.finditer(text):
        start = m.start()
        parts.append(text[last:start])
        parts.append(re.sub(r"[^\n]", " ", m.group()))
        last = m.end()
        if m.group().startswith("//"):
            line_start = text.rfind("\n", 0, start) + 1
            body = m.group()[2:]
            body = body[1:] if body.startswith(" ") else body
            found.append(
                LineComment(
                    text.count("\n", 0, start) + 1,
                    body.rstrip(),
                    not text[line_start:start].strip(),
                )
            )
    parts.append(text[last:])
    return found, "".join(parts)


def run_above(comments: dict[int, LineComment], line: int) -> list[str]:
    """Texts of the unbroken run of own-line comments ending on the line just above ``line``."""
    run: list[str] = []
    while (c := comments.get(line - 1 - len(run))) is not None and c.own_line:
        run.append(c.text)
    return run[::-1]
