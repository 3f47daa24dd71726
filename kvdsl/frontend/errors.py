"""Frontend errors, each pointing at ``file:line:col``, and the translation of lark's errors.

Every error the frontend raises subclasses :class:`FrontendError` (a ``ValueError``):
:class:`WgslSyntaxError` for text the grammar rejects, :class:`UnsupportedError` for valid WGSL
outside the subset kvdsl's IR can hold, :class:`WgslTypeError` for a kernel the verifier rejects
(its line is the statement or declaration the problem came from).
"""

from __future__ import annotations

import re
import string

from lark import Lark
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from kvdsl.frontend.comments import LINE_BREAKS


class FrontendError(ValueError):
    """WGSL the frontend cannot turn into a kernel; ``str()`` is ``file:line:col: message``."""

    def __init__(self, message: str, filename: str, line: int | None, column: int | None = None):
        self.message = message
        self.filename = filename
        self.line = line
        self.column = column
        where = filename
        if line is not None:
            where += f":{line}"
            if column is not None:
                where += f":{column}"
        super().__init__(f"{where}: {message}")


class WgslSyntaxError(FrontendError):
    """The text is not in the grammar; ``token`` is what was found, ``expected`` what would fit."""

    def __init__(
        self,
        message: str,
        filename: str,
        line: int,
        column: int,
        token: str,
        expected: tuple[str, ...],
    ):
        super().__init__(message, filename, line, column)
        self.token = token
        self.expected = expected


class UnsupportedError(FrontendError):
    """Valid WGSL, but a construct outside the subset the IR can represent.

    ``construct`` names it; the message says it is outside the subset.
    """

    def __init__(self, construct: str, filename: str, line: int | None, column: int | None = None):
        super().__init__(
            f"{construct} is outside the supported WGSL subset", filename, line, column
        )
        self.construct = construct


class WgslTypeError(FrontendError):
    """The parsed kernel is ill-typed or ill-formed (the verifier's message, with its line)."""


# Reserved words of constructs the subset leaves out, found before parsing so the error names
# the construct rather than whatever token the grammar trips over next.
UNSUPPORTED_WORDS = {
    "fallthrough": "switch statements",
    "discard": "discard",
}
_WORD = re.compile(r"\b(" + "|".join(UNSUPPORTED_WORDS) + r")\b")
#: The attributes of a render pipeline's entry points: kvdsl takes compute shaders only.
_STAGE = re.compile(r"@[ \t\r\n]*(vertex|fragment)\b")


def check_words(code: str, filename: str) -> None:
    """Raise :class:`UnsupportedError` at a vertex or fragment entry point, else at the first
    reserved word of an unsupported construct.

    ``code`` is the source with its comments blanked out (positions unchanged).
    """
    stage = _STAGE.search(code)
    if stage is not None:
        line, column = position(code, stage.start())
        raise UnsupportedError(
            f"a @{stage.group(1)} entry point (kvdsl takes compute entry points only: " "@compute)",
            filename,
            line,
            column,
        )
    m = _WORD.search(code)
    if m is not None:
        line, column = position(code, m.start())
        word = m.group(1)
        raise UnsupportedError(
            f"'{word}' ({UNSUPPORTED_WORDS[word]})",
            filename,
            line,
            column,
        )


_NON_ASCII_WORD = re.compile(r"\w*(?:(?![\x00-\x7f])\w)\w*")  # a word with a letter past ASCII


def check_identifiers(code: str, filename: str) -> None:
    """Raise :class:`WgslSyntaxError` at the first character past ASCII that leaves a word no
    WGSL identifier (Unicode's XID_Start or ``_``, then XID_Continue) or follows a number's
    digits: the grammar's names take any word characters."""
    for m in _NON_ASCII_WORD.finditer(code):
        word = m.group()
        if word[0].isdigit():
            bad = next(k for k, c in enumerate(word) if not c.isascii())
        else:
            bad = next((k for k in range(len(word)) if not word[: k + 1].isidentifier()), None)
            if bad is None:
                continue
        char = word[bad]
        line, column = position(code, m.start() + bad)
        raise WgslSyntaxError(
            f"unexpected character '{char}' (U+{ord(char):04X})", filename, line, column, char, ()
        )


def position(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column of ``offset`` in ``text``."""
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


# Tokens that may follow a complete operand; when most of them are expected, the message says
# "an operator" instead of listing twenty spellings.
_OPERATORS = {
    "*", "/", "%", "+", "-", "<<", ">>", "<", "<=", ">", ">=", "==", "!=", "&", "|", "^", "&&",
    "||", "[", ".", "(",
}  # fmt: skip
_NAMED = {
    "NAME": "a name",
    "MAT": "a matrix type",
    "NUMBER": "a number",
    "COMPOUND_OP": "a compound assignment",
    "$END": "end of input",
}


def _spell(parser: Lark, terminal: str) -> str:
    if terminal in _NAMED:
        return _NAMED[terminal]
    try:
        pattern = parser.get_terminal(terminal).pattern
    except KeyError:
        return terminal
    return f"'{pattern.value}'" if pattern.type == "str" else terminal


_EXPR_START = {"'-'", "'!'", "'~'", "'&'", "'*'", "'('", "'true'", "'false'", "'vec2'", "'vec3'"}
_EXPR_START |= {"'vec4'", "'array'", "'bitcast'", "a name", "a number", "a matrix type"}


def _expected(parser: Lark, names: set[str]) -> tuple[str, ...]:
    spelled = {_spell(parser, n) for n in names}
    tail: tuple[str, ...] = ()
    if {"a name", "a number", "'('"} <= spelled and "'true'" in spelled:
        spelled -= _EXPR_START
        tail += ("an expression",)
    ops = {f"'{o}'" for o in _OPERATORS} & spelled
    if len(ops) > 3:
        spelled -= ops
        tail += ("an operator",)
    return tuple(sorted(spelled)) + tail


def _describe(expected: tuple[str, ...]) -> str:
    if not expected:
        return ""
    if len(expected) == 1:
        return f"; expected {expected[0]}"
    return f"; expected one of {', '.join(expected[:-1])} or {expected[-1]}"


def _accepted(err: UnexpectedToken | UnexpectedEOF) -> set[str]:
    # LALR merges states, so err.expected can list tokens that would fail a step later; the
    # interactive parser tries each one.
    ip = getattr(err, "interactive_parser", None)
    return set(ip.accepts()) if ip is not None else set(err.expected)


def syntax_error(err: UnexpectedInput, parser: Lark, text: str, filename: str) -> WgslSyntaxError:
    """Translate lark's ``err`` into a :class:`WgslSyntaxError` at the offending token."""
    if isinstance(err, UnexpectedToken) and err.token.type != "$END":
        tok = err.token
        found = f"'{tok.value}'"
        expected = _expected(parser, _accepted(err))
        return WgslSyntaxError(
            f"unexpected {found}{_describe(expected)}",
            filename,
            tok.line,
            tok.column,
            str(tok.value),
            expected,
        )
    if isinstance(err, UnexpectedCharacters):
        # The contextual lexer's allowed set is its state's, not what would parse: name no
        # expectations, but show a malformed number or name whole.
        word = re.match(r"[0-9A-Za-z_.]*", text[err.pos_in_stream :]).group()
        bad = word if len(word) > 1 else text[err.pos_in_stream]
        what = (
            f"malformed number or name '{bad}'"
            if len(word) > 1
            else f"unexpected character '{bad}'"
            + ("" if bad.isascii() and bad.isprintable() else f" (U+{ord(bad):04X})")
        )
        return WgslSyntaxError(what, filename, err.line, err.column, bad, ())
    if isinstance(err, (UnexpectedToken, UnexpectedEOF)):
        end = len(text.rstrip())
        line, column = position(text, end)
        expected = _expected(parser, _accepted(err))
        return WgslSyntaxError(
            f"unexpected end of input{_describe(expected)}", filename, line, column, "", expected
        )
    raise TypeError(f"not a lark input error: {err!r}")


#: Names that may open a template list in WGSL (the predeclared type generators and ``var``);
#: those outside kvdsl's subset are refused elsewhere, with their own message.
TEMPLATED = frozenset({"var", "array", "vec2", "vec3", "vec4", "bitcast", "ptr", "atomic"})
_TEMPLATED_FAMILY = re.compile(r"texture_\w+|mat[234]x[234]")
#: WGSL's blankspace (Python's ``\s`` takes more, a no-break space among them).
BLANK = " \t\u200e\u200f" + LINE_BREAKS
_SKIP = re.compile(f"[{BLANK}]+")
_BLANK = frozenset(BLANK)
_DIGITS = frozenset(string.digits)
_IDENT_START = frozenset(string.ascii_letters + "_")
_IDENT = re.compile(r"[^\W\d]\w*")  # ASCII, or any script's letters (check_identifiers)
_NUMBER = re.compile(
    r"0[xX][0-9a-fA-F.]+(?:[pP][+-]?[0-9]+)?[fhiu]?"
    r"|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fhiu]?"
)


def template_lists(code: str) -> list[tuple[int, int, int]]:
    """The template lists WGSL's template-list discovery finds in ``code`` (comments blanked):
    ``(name start, '<' offset, '>' offset)`` each. The algorithm of the WGSL specification
    (*Template Lists*): a name followed by ``<`` (not ``<<`` or ``<=``) opens a candidate at
    the current nesting depth of ``()`` and ``[]``; a ``>`` at the depth of the innermost
    candidate closes it; a closing bracket, ``&&`` or ``||`` drops the candidates at its depth,
    and ``;``, ``{``, ``:`` or an assignment's ``=`` drops every one."""
    found: list[tuple[int, int, int]] = []
    pending: list[tuple[int, int, int]] = []  # (name start, '<' offset, depth)
    depth, i, n = 0, 0, len(code)
    while i < n:
        c = code[i]
        if c in _BLANK:
            i = _SKIP.match(code, i).end()
        elif c in _DIGITS or (c == "." and code[i + 1 : i + 2] in _DIGITS):
            i = _NUMBER.match(code, i).end()
        elif c in _IDENT_START or not c.isascii() and c.isidentifier():  # a name: été<
            start, i = i, _IDENT.match(code, i).end()
            j = _SKIP.match(code, i).end() if code[i : i + 1] in _BLANK else i
            if code[j : j + 1] == "<":
                i = j + 1
                if code[i : i + 1] in ("<", "="):
                    i += 1  # '<<', '<=' or '<<=': an operator
                else:
                    pending.append((start, j, depth))
        elif c == ">":
            if pending and pending[-1][2] == depth:
                start, lt, _ = pending.pop()
                found.append((start, lt, i))
                i += 1
            else:
                i += 2 if code[i + 1 : i + 2] == "=" else 1
        elif c in "([":
            depth, i = depth + 1, i + 1
        elif c in ")]":
            while pending and pending[-1][2] >= depth:
                pending.pop()
            depth, i = max(0, depth - 1), i + 1
        elif c == "!":
            i += 2 if code[i + 1 : i + 2] == "=" else 1
        elif c == "=":
            if code[i + 1 : i + 2] == "=":
                i += 2
            else:
                depth, i = 0, i + 1
                pending.clear()
        elif c in ";{:":
            depth, i = 0, i + 1
            pending.clear()
        elif code[i : i + 2] in ("&&", "||"):
            while pending and pending[-1][2] >= depth:
                pending.pop()
            i += 2
        else:
            i += 1
    return found


def check_template_lists(code: str, filename: str) -> None:
    """Raise :class:`WgslSyntaxError` where WGSL's template-list discovery
    (:func:`template_lists`) opens a template list at a name that takes none: a comparison
    ``a < b`` that a later ``>`` at the same depth closes, e.g. ``select(a < b, c, d >= e)``,
    which every WGSL compiler refuses (kvdsl's grammar alone would read a comparison)."""
    for start, lt, gt in template_lists(code):
        name = code[start:lt].strip()
        if name not in TEMPLATED and not _TEMPLATED_FAMILY.fullmatch(name):
            line, column = position(code, lt)
            gt_line, gt_column = position(code, gt)
            raise WgslSyntaxError(
                f"WGSL reads '{name} <' as the start of a template list that the '>' at "
                f"{gt_line}:{gt_column} closes (template lists are found before parsing, "
                "commas notwithstanding): parenthesise the comparison",
                filename,
                line,
                column,
                "<",
                (),
            )


def discarded(what: str, filename: str, line: int, column: int | None) -> WgslSyntaxError:
    """The refusal of a call statement of ``what``, a builtin that returns a value: WGSL's
    builtins that return one are @must_use, so a statement may not discard it."""
    return WgslSyntaxError(
        f"the value of {what}(...) is discarded: WGSL refuses a call statement of a "
        "builtin that returns a value (@must_use)",
        filename,
        line,
        column,
        "",
        (),
    )
