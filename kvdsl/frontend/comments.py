"""Find the ``//`` comments of WGSL source, which the grammar skips but the IR keeps.

An own-line comment (only whitespace before it) inside a function body becomes a
:class:`~kvdsl.ir.tree.Comment` statement; own-line comments directly above a module ``const``
become its ``comment``, and those directly above ``@compute`` the kernel's ``doc``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Found left to right, so a "//" inside a block comment (or "/*" inside a line comment) is part
# of that comment. Block comments nest, as WGSL's do: "/* a /* b */ c */" is one comment.
_MARK = re.compile(r"//|/\*")
_BLOCK = re.compile(r"/\*|\*/")
#: WGSL's line breaks (a ``//`` comment ends at any of them).
LINE_BREAKS = "\n\x0b\x0c\r\x85\u2028\u2029"
_LINE_BREAK = re.compile(f"[{LINE_BREAKS}]")
# Every line break but "\n" and the "\r" of "\r\n" (which the "\n" after it counts).
_OTHER_BREAK = re.compile("\r(?!\n)|[\x0b\x0c\x85\u2028\u2029]")


def one_line_break(text: str) -> str:
    """``text`` with each of WGSL's line breaks spelt as a newline (CR LF kept as it is).

    One character for one, so offsets do not move; lines and columns counted by newlines (the
    parser's and the error messages') then count WGSL's lines.
    """
    return _OTHER_BREAK.sub("\n", text)


class UnterminatedComment(ValueError):
    """A ``/*`` whose comment (nested ones counted) never closes; ``offset`` is where it opens."""

    def __init__(self, offset: int) -> None:
        super().__init__(f"unterminated block comment at offset {offset}")
        self.offset = offset


def _comments(text: str):
    """The ``(start, end)`` of each comment of ``text``, in order."""
    i = 0
    while (m := _MARK.search(text, i)) is not None:
        start = m.start()
        if m.group() == "//":
            br = _LINE_BREAK.search(text, start)  # any of WGSL's line breaks ends it
            end = len(text) if br is None else br.start()
        else:
            depth, end = 1, m.end()
            while depth:
                b = _BLOCK.search(text, end)
                if b is None:
                    raise UnterminatedComment(start)
                depth += 1 if b.group() == "/*" else -1
                end = b.end()
        yield start, end
        i = end


@dataclass(frozen=True, slots=True)
class LineComment:
    line: int
    text: str  # without the "//" and one following space, trailing blanks removed
    own_line: bool


def scan(text: str) -> tuple[list[LineComment], str]:
    """The line comments of ``text``, and ``text`` with every comment blanked out.

    Blanking keeps newlines, so offsets, lines and columns in the blanked text match the source.
    Raises :class:`UnterminatedComment` for a block comment that never closes.
    """
    found: list[LineComment] = []
    parts: list[str] = []
    last = 0
    line = 1  # the line of ``last``: counted from one comment to the next, never from the start
    for start, end in _comments(text):
        group = text[start:end]
        parts.append(text[last:start])
        line += text.count("\n", last, start)
        if group.startswith("//"):  # it ends at a line break, so it holds none
            parts.append(" " * len(group))
            # The line's start, looked for no further back than the last comment's end: a
            # comment before it on the same line means it is not on a line of its own.
            br = text.rfind("\n", last, start)
            before = text[br + 1 : start] if br >= 0 or last == 0 else "/"
            body = group[2:]
            body = body[1:] if body.startswith(" ") else body
            found.append(LineComment(line, body.rstrip(), not before.strip()))
        else:
            rows = group.split("\n")
            parts.append("\n".join(" " * len(r) for r in rows))
            line += len(rows) - 1
        last = end
    parts.append(text[last:])
    return found, "".join(parts)


def run_above(comments: dict[int, LineComment], line: int) -> list[str]:
    """Texts of the unbroken run of own-line comments ending on the line just above ``line``."""
    run: list[str] = []
    while (c := comments.get(line - 1 - len(run))) is not None and c.own_line:
        run.append(c.text)
    return run[::-1]
