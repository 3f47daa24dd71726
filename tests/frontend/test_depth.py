"""Nesting, expression sizes and integer literals past what WGSL compilers take are refused
before parsing (kvdsl.frontend.depth), located and in Tint's words: brackets nested 128 deep at
the token where Tint stops, more than 512 operators in one expression at the operator past
them, integer literals past 64 bits. None of them reaches Python's recursion limit."""

from __future__ import annotations

import re

import pytest

from kvdsl.frontend import WgslSyntaxError, parse
from kvdsl.frontend.depth import MAX_NESTING, MAX_OPERATORS, TooDeep

HEAD = "@group(0) @binding(0) var<storage, read_write> o: array<i32>;\n"
#: The line every case puts its expression on: two brackets open before it ('{' and 'i32(').
BODY = "@compute @workgroup_size(1) fn main() { o[0] = i32("
OPEN = 2


def kernel(expr: str) -> str:
    return HEAD + BODY + expr + "); }\n"


def refusal(text: str) -> tuple[int, int, str]:
    """The line, the column and the message kvdsl refuses ``text`` with."""
    with pytest.raises(WgslSyntaxError) as err:
        parse(text)
    e = err.value
    return e.line, e.column, str(e).split(": ", 1)[1]


#: Nested parentheses and nested indices around a literal.
NESTINGS = {
    "(": lambda n: "(" * n + "1" + ")" * n,
    "[": lambda n: "o[" * n + "0" + "]" * n,
}


@pytest.mark.parametrize("bracket", list(NESTINGS))
def test_brackets_nested_128_deep_are_refused_where_tint_stops(bracket):
    inner = NESTINGS[bracket]
    most = MAX_NESTING - 1 - OPEN  # 127 brackets in all: taken
    parse(kernel(inner(most)))
    line, column, message = refusal(kernel(inner(most + 1)))
    # Tint stops at the token after the bracket that makes 128: the literal inside them all.
    assert message == "maximum parser recursive depth reached"
    literal = re.search(r"\d", inner(most + 1)).start()
    assert (line, column) == (2, len(BODY) + literal + 1)


def test_blocks_count_with_brackets():
    # '{' nests as '(' does: 127 blocks are taken, 128 refused at the first '}'.
    fn = "@compute @workgroup_size(1) fn main() "
    parse(HEAD + fn + "{" * 127 + "}" * 127 + "\n")
    line, column, message = refusal(HEAD + fn + "{" * 128 + "}" * 128 + "\n")
    assert (line, column, message) == (2, len(fn) + 129, "maximum parser recursive depth reached")


def test_ten_thousand_parentheses_are_one_located_refusal():
    line, column, message = refusal(kernel("(" * 10_000 + "1" + ")" * 10_000))
    assert isinstance(_raised(kernel("(" * 10_000 + "1" + ")" * 10_000)), TooDeep)
    assert (line, message) == (2, "maximum parser recursive depth reached")
    assert column == len(BODY) + MAX_NESTING - OPEN + 1


def test_brackets_in_comments_and_strings_of_comments_do_not_count():
    comment = "// " + "(" * 500 + "\n/* " + "{" * 500 + " */\n"
    parse(comment + kernel("(((1)))"))


def _raised(text: str) -> Exception:
    try:
        parse(text)
    except Exception as err:  # noqa: BLE001 (the exception itself is what is checked)
        return err
    raise AssertionError("parsed")


def test_more_than_512_operators_in_one_expression_are_refused_at_the_one_past():
    # 512 are taken (tests/cli/test_nesting.py runs them: parsing them recurses past Python's
    # default limit, which the kvdsl command raises).
    text = kernel(" + ".join(["1"] * (MAX_OPERATORS + 2)))
    line, column, message = refusal(text)
    plus = [m.start() for m in re.finditer(r"\+", text.splitlines()[1])]
    assert (line, column) == (2, plus[MAX_OPERATORS] + 1)
    assert message.startswith("more than 512 operators in one expression")
    assert "'reached max expression depth of 512'" in message


def test_ten_thousand_terms_are_one_located_refusal():
    err = _raised(kernel(" + ".join(["o[0]"] * 10_000)))
    assert isinstance(err, TooDeep) and err.line == 2, err
    assert "more than 512 operators" in str(err)


def test_operators_of_separate_statements_count_apart():
    # 300 operators in each of two statements: each is one expression of its own.
    chain = " + ".join(["1"] * 301)
    parse(HEAD + BODY + chain + "); o[1] = i32(" + chain + "); }\n")


@pytest.mark.parametrize(
    "literal, words",
    [
        ("1" + "0" * 20, "value cannot be represented as 'abstract-int'"),
        ("7" * 26 + "i", "value cannot be represented as 'i32'"),
        ("9" * 5000, "value cannot be represented as 'abstract-int'"),
        ("0x" + "f" * 17, "value cannot be represented as 'abstract-int'"),
        ("0x" + "f" * 5000 + "u", "value cannot be represented as 'u32'"),
    ],
    ids=["21 digits", "26 digits i32", "5000 digits", "hex past 64 bits", "hex 5000 digits"],
)
def test_integer_literals_past_64_bits_are_refused_in_tints_words(literal, words):
    line, column, message = refusal(kernel(literal))
    assert (line, column) == (2, len(BODY) + 1)
    assert message.startswith(words + ": "), message
    assert "fits no WGSL type" in message


def test_the_refusals_are_tints():
    # Tint refuses the same texts with the same words at the same line and column (its line
    # numbers count from the module's first line, as kvdsl's do).
    from kvdsl.runtime import tint_check

    deep = kernel("(" * 126 + "1" + ")" * 126)
    long = kernel("1" + "0" * 25)
    got = tint_check({"deep": deep, "long": long})
    for name, text in (("deep", deep), ("long", long)):
        line, column, message = refusal(text)
        words = message.split(":")[0]
        assert f":{line}:{column} error: {words}" in got[name], (got[name], message)
