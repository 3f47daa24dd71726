"""The language's edges the case files cannot hold: non-ASCII text and WGSL's line breaks, names
that would shadow a type or builtin, and colour swizzles. The hand-written edge cases, each
parsed by kvdsl and compiled by naga and Tint (Dawn's Null backend), are conformance cases
(``cases/wgsl_edges/``, run by ``test_wgsl_cases.py``): where kvdsl takes a text, both compilers
must; kvdsl may be stricter (its subset, its declaration order, a barrier only under a uniform
condition as Tint requires and naga does not check; docs/grammar.md names each)."""

from __future__ import annotations


import pytest

from kvdsl.emit import emit
from kvdsl.frontend import FrontendError, parse
from kvdsl.runtime import tint_check
from tests.helpers.wgsl import kernel

H = "@group(0) @binding(0) var<storage, read_write> out: array<u32>;\n"


def k(body: str, head: str = H) -> str:
    return kernel(body, head)


def helper(fn: str) -> str:
    return H + fn + "\n"


# An entry point that calls the helper f.
E = (
    "@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
    "  out[0u] = f(1u);\n}\n"
)


def test_text_outside_wgsl_is_an_error_not_a_crash():
    # Non-ASCII text that is no WGSL identifier (a superscript digit, in a name or after a
    # number's digits); the template-list scan must give an error, not an AttributeError. A
    # no-break space is no WGSL blankspace (Tint and naga refuse it).
    for body, column, char in (
        ("  let x\u00b2 = 1u;", 8, "'\u00b2' (U+00B2)"),
        ("  let x = 1u\u00b2;", 13, "'\u00b2' (U+00B2)"),
        ("  let x\u00a0= 1u;", 8, "'\u00a0' (U+00A0)"),
    ):
        with pytest.raises(FrontendError) as info:
            parse(k(body))
        assert str(info.value) == f"<wgsl>:4:{column}: unexpected character {char}"


def test_wgsl_line_breaks_end_a_line_comment():
    # U+2028 is a WGSL line break: the store after it is code, as naga and Tint read it.
    k2028 = parse(k("  out[0u] = 1u; // c\u2028  out[1u] = 2u;"))
    assert k2028.body == parse(k("  out[0u] = 1u; // c\n  out[1u] = 2u;")).body


@pytest.mark.parametrize(
    "br", ["\n", "\r\n", "\r", "\x0b", "\x0c", "\x85", "\u2028", "\u2029"], ids=ascii
)
def test_errors_count_wgsl_lines_whatever_ends_them(br):
    # Every WGSL line break ends a line of the error's location (lark and the messages counted
    # "\n" alone: a file of lone CRs had every error on line 1), a CR LF once.
    text = k("  let a = 1u;\n  let b = a + 1i;\n  out[0u] = b;").replace("\n", br)
    with pytest.raises(FrontendError) as info:
        parse(text)
    assert info.value.line == 5, str(info.value)
    bad = k("  let a = 1u;\n  let b = a +;").replace("\n", br)
    with pytest.raises(FrontendError) as info:
        parse(bad)
    assert (info.value.line, info.value.column) == (5, 14), str(info.value)


def test_a_declaration_takes_a_type_or_builtin_name_in_its_scope():
    # As WGSL scopes it: within the scope the name is the declaration's (kvdsl gives it a
    # fresh one, u32_, that prints back); past it, the type again (the op table's builtins:
    # test_shadowed_builtins.py; kernels run: tests/frontend/test_tint_takes.py).
    texts = {
        "parameter": helper("fn f(u32: u32) -> u32 { return u32 + 1u; }") + E,
        "entry_point": k("  out[0u] = 1u;").replace("fn main(", "fn vec4u("),
    }
    assert {n: e for n, e in tint_check(texts).items() if e is not None} == {}
    for text in texts.values():
        kernel_ = parse(text)
        assert parse(emit(kernel_)) == kernel_
    assert "fn f(u32_: u32) -> u32" in emit(parse(texts["parameter"]))


def test_colour_swizzles_read_as_xyzw():
    text = "  var v = vec4<u32>(1u);\n  v.g = 2u;\n  out[0u] = v.rg.y + v.a;"
    xyzw = text.replace(".g ", ".y ").replace(".rg.", ".xy.").replace(".a;", ".w;")
    assert parse(k(text)).body == parse(k(xyzw)).body
