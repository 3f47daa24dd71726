"""The frontend's errors point at the source; hand-written WGSL and the legacy template parse."""

from __future__ import annotations

import pytest

from kvdsl.emit import emit
from kvdsl.frontend import (
    FrontendError,
    UnsupportedError,
    WgslSyntaxError,
    WgslTypeError,
    parse,
    parse_with_lines,
)
from kvdsl.frontend.parser import wgsl_parser
from kvdsl.ir import ops
from kvdsl.ir.tree import Assign, Binary, Comment, Convert, For, If, Index, Let, Lit, Name, Var
from kvdsl.ir.ops import Op
from kvdsl.ir.types import Array, Vec, f32, i32, u32
from tests.helpers.wgsl import HEAD, kernel

# (source, line, column, message)
MALFORMED = [
    (
        kernel("  let x = 1u\n  out[0u] = x;"),
        5,
        3,
        "unexpected 'out'; expected one of ';' or an operator",
    ),
    (kernel("  let x = (1u + 2u;"), 4, 19, "unexpected ';'; expected ')'"),
    (kernel("  out[0u] = 1u + ;"), 4, 18, "unexpected ';'; expected an expression"),
    (kernel("  let x = 1u < 2u < 3u;"), 4, 19, "unexpected '<'; expected one of '&&', ';' or '||'"),
    (kernel("  let x = 1u & 2u | 3u;"), 4, 19, "unexpected '|'; expected one of '&' or ';'"),
    (
        kernel("  let x = true && false || true;"),
        4,
        25,
        "unexpected '||'; expected one of '&&' or ';'",
    ),
    (
        kernel("  let x = 1u << 2u << 3u;"),
        4,
        20,
        "unexpected '<<'; expected one of ';' or an operator",
    ),
    (
        kernel("  let x = 1u + 2u << 3u;"),
        4,
        19,
        "unexpected '<<'; expected one of ';' or an operator",
    ),
    (kernel("  let x = 1u & 2u + 3u;"), 4, 19, "unexpected '+'; expected one of '&' or ';'"),
    (kernel("  out[0u] = 1u"), 5, 3, "unexpected 'out'; expected one of ';' or an operator"),
    (
        kernel("  if 1u < 2u  out[0u] = 1u; }"),
        4,
        15,
        "unexpected 'out'; expected one of '{' or an operator",
    ),
    (kernel("  for (var i = 0u; i < 4u) { out[i] = i; }"), 4, 26, "unexpected ')'; expected ';'"),
    (kernel("  let = 3u;"), 4, 7, "unexpected '='; expected a name"),
    (
        kernel("  let x: = 3u;"),
        4,
        10,
        "unexpected '='; expected one of 'array', 'vec2', 'vec3', 'vec4' or a name",
    ),
    (kernel("  let x = 3u $ 4u;"), 4, 14, "unexpected character '$'"),
    (kernel("  let x = 012u;"), 4, 11, "leading zeros are not allowed in a WGSL literal"),
    (kernel("  let x = 4294967296u;"), 4, 11, "literal 4294967296u does not fit u32"),
    (kernel("  let x = 2147483648i;"), 4, 11, "literal 2147483648i does not fit i32"),
    (kernel("  let x = 1.5.x;"), 4, 11, "malformed number or name '1.5.x'"),
    (kernel("  let x = vec4<f32(1.0);"), 4, 19, "unexpected '('; expected one of '<' or '>'"),
    (kernel("  out[0u] += ;"), 4, 14, "unexpected ';'; expected an expression"),
    (
        kernel("  out[0u] = 1u;\n  }"),
        6,
        3,
        "unexpected 'out'; expected one of ';', '@', 'alias', 'const', 'const_assert', 'fn', "
        "'override', 'struct', 'var' or end of input",
    ),
    ("fn main( {\n}\n", 1, 10, "unexpected '{'; expected one of ')', '@' or a name"),
    ("struct Params { a: u32 b: u32 }\n", 1, 24, "unexpected 'b'; expected one of ',', '<' or '}'"),
    (
        "@group(0) @binding(0) var<storage, read> x array<f32>;\n",
        1,
        44,
        "unexpected 'array'; expected one of ':', ';' or '='",
    ),
    (
        "const X: u32 = 3u\nconst Y: u32 = 4u;\n",
        2,
        1,
        "unexpected 'const'; expected one of ';' or an operator",
    ),
    (
        kernel("  else { out[0u] = 1u; }"),
        4,
        8,
        "unexpected '{'; expected one of '++', '--', '.', ';', '=', '[' or a compound assignment",
    ),
    (kernel("  out[0u] = 1u; x;"), 4, 17, "an expression is not a statement (only a call is)"),
    (kernel("  let x = -;"), 4, 12, "unexpected ';'; expected an expression"),
    (kernel("  let x = a[1u;"), 4, 15, "unexpected ';'; expected ']'"),
    ("enable f16\n", 1, 11, "unexpected end of input; expected one of ',' or ';'"),
    (
        kernel("  let x = out[0u] = 1u;"),
        4,
        19,
        "unexpected '='; expected one of ';' or an operator",
    ),
    (kernel("  loop { break }"), 4, 16, "unexpected '}'; expected ';'"),
    (kernel("  return 1u +"), 5, 11, "unexpected '='; expected one of ';' or an operator"),
    # A keyword run into the name after it is one word (lark's contextual lexer used to split
    # it where no name could stand, reading "constN" as "const N").
    (
        "constN: u32 = 4u;\n",
        1,
        1,
        "unexpected 'constN'; expected one of ';', '@', 'alias', 'const', 'const_assert', "
        "'diagnostic', 'enable', 'fn', 'override', 'requires', 'struct', 'var' or end of input",
    ),
    (
        "@compute @workgroup_size(64)\nfnmain() {\n}\n",
        2,
        1,
        "unexpected 'fnmain'; expected one of 'fn', 'override' or 'var'",
    ),
    # Block comments nest, as WGSL's do: this one never closes (Tint: "unterminated block
    # comment"), not at the first "*/".
    (
        kernel("  /* a /* b */ out[0u] = 1u;"),
        4,
        3,
        "a block comment that never closes ('/*' and '*/' nest, as in WGSL)",
    ),
    # "--" is one token, as WGSL tokenises it (not "a - -b").
    (kernel("  let c = 1i--1i;"), 4, 13, "unexpected '--'; expected one of ';' or an operator"),
    # WGSL finds template lists before it parses: "gid.x <" opens one that the ">" of ">="
    # in the next argument closes (Tint: "parsed as template list"; naga refuses it too).
    (
        kernel("  out[0u] = select(0u, 1u, select(gid.x < 2u, false, gid.y >= 3u));"),
        4,
        41,
        "WGSL reads 'x <' as the start of a template list that the '>' at 4:60 closes "
        "(template lists are found before parsing, commas notwithstanding): parenthesise the "
        "comparison",
    ),
    (
        kernel("  out[0u] = gid.x < gid.y >> 1u;"),
        4,
        19,
        "WGSL reads 'x <' as the start of a template list that the '>' at 4:27 closes "
        "(template lists are found before parsing, commas notwithstanding): parenthesise the "
        "comparison",
    ),
]


@pytest.mark.parametrize("source, line, column, message", MALFORMED)
def test_syntax_error_points_at_token(source: str, line: int, column: int, message: str) -> None:
    with pytest.raises(WgslSyntaxError) as info:
        parse(source, "bad.wgsl")
    err = info.value
    assert (err.line, err.column, err.message) == (line, column, message)
    assert str(err) == f"bad.wgsl:{line}:{column}: {message}"
    assert isinstance(err, FrontendError) and isinstance(err, ValueError)


UNSUPPORTED = [
    (
        kernel("  let c = textureSample(t, s, vec2<f32>(0.0, 0.0));"),
        4,
        11,
        "WGSL builtin 'textureSample'",
    ),
    (
        kernel("", HEAD + "var<workgroup> tile: f32;\n"),
        2,
        16,
        "workgroup var 'tile' of type f32 (only fixed-size arrays and atomics)",
    ),
    (
        kernel("", HEAD + "var<private> g: u32;\n"),
        2,
        14,
        "var<private> (storage, uniform and workgroup only)",
    ),
    (kernel("  let d = dpdx(1.0);"), 4, 11, "WGSL builtin 'dpdx'"),
    (kernel("  let m = mat2x2<f32>(1.0, 0.0, 0.0, 1.0);"), 4, 11, "'mat2x2' (matrix types)"),
    (
        kernel("", HEAD + "@group(0) @binding(1) var t: texture_2d<f32>;\n"),
        2,
        30,
        "type 'texture_2d<...>'",
    ),
    (kernel("  discard;"), 4, 3, "'discard' (discard)"),
    (kernel("  let x = fwidth(vec2f(1.0));"), 4, 11, "WGSL builtin 'fwidth'"),
    (kernel("  _ = out[0u];"), 4, 3, "phony assignment '_ = ...'"),
]


@pytest.mark.parametrize("source, line, column, construct", UNSUPPORTED)
def test_construct_outside_subset(source: str, line: int, column: int, construct: str) -> None:
    with pytest.raises(UnsupportedError) as info:
        parse(source, "k.wgsl")
    err = info.value
    assert (err.line, err.column, err.construct) == (line, column, construct)
    assert str(err) == f"k.wgsl:{line}:{column}: {construct} is outside the supported WGSL subset"


TYPE_ERRORS = [
    (kernel("  let x = 1u;\n  let y: i32 = x;"), 5, "let y: i32 is initialised with a u32"),
    (kernel("  let x = 1u + 1i;"), 4, "(1u + 1i): + operands of different types: u32, i32"),
    (kernel("  if (1u) { return; }"), 4, "condition is u32, expected bool"),
    (kernel("  let x = 1u;\n\n  x = 2u;"), 6, "x = 2u: 'x' is a let, not a var"),
    (
        kernel("  out[0u] = 1.5;"),
        4,
        "out[0u] = 1.5f: cannot store f32 into out[0u] of type u32",
    ),
    (kernel("  let x: u32 = -1;"), 4, "literal -1 is not a valid u32 value"),
    (kernel("  let x = y;"), 4, "undefined name 'y'"),
    # A function-scope const is evaluated when WGSL compiles: no runtime value in it (naga and
    # Tint refuse these; they are not lets).
    (
        kernel("  const x = gid.x;\n  out[0u] = x;"),
        4,
        "const x: 'gid' is a builtin, not a const (a const is evaluated when the shader compiles: "
        "use let)",
    ),
    (
        kernel("  let a = 2u;\n  const x = a + 1u;\n  out[0u] = x;"),
        5,
        "const x: 'a' is a let, not a const (a const is evaluated when the shader compiles: use let)",
    ),
    # WGSL takes the workgroup size's arguments all i32 or all u32 (Tint refuses a mix, naga
    # takes it) and each builtin once.
    (
        kernel("", HEAD).replace("@workgroup_size(64)", "@workgroup_size(64u, 1i)"),
        2,
        "@workgroup_size arguments of different types (i32, u32): WGSL takes all i32 or all u32",
    ),
    (
        kernel("", HEAD).replace(
            "gid: vec3<u32>", "gid: vec3<u32>, @builtin(global_invocation_id) g2: vec3<u32>"
        ),
        3,
        "@builtin(global_invocation_id) on 'gid' and 'g2': WGSL takes each builtin once",
    ),
    # A uniform's field of a type no uniform holds: located at the uniform (an AttributeError
    # would otherwise leave the module scope's check no line to give).
    (
        "struct P { b: bool, }\n" + HEAD + "@group(0) @binding(1) var<uniform> params: P;\n"
        "@compute @workgroup_size(64)\nfn main() {\n  out[0u] = select(0u, 1u, params.b);\n}\n",
        3,
        "params field 'b': type bool cannot be uniform",
    ),
    # WGSL writes one component of a vector at a time (naga refuses "v.xy = ...").
    (
        kernel("  var v = vec4<u32>(1u);\n  v.xy = vec2<u32>(2u);\n  out[0u] = v.x;"),
        5,
        "v.xy = vec2<u32>(2u): cannot assign to the swizzle v.xy (WGSL writes one component at a "
        "time)",
    ),
    # @group and @binding take a non-negative i32 (Tint: "value ... cannot be represented as
    # 'i32'", "'@binding' value must be non-negative"); kvdsl took any integer.
    (
        kernel("", "@group(0) @binding(-1) var<storage, read_write> out: array<u32>;\n"),
        1,
        "@binding(-1) on var 'out': WGSL takes a non-negative i32 (0 to 2147483647)",
    ),
    (
        kernel("", "@group(0x7FFFFFFF0) @binding(0) var<storage, read_write> out: array<u32>;\n"),
        1,
        "@group(34359738352) on var 'out': WGSL takes a non-negative i32 (0 to 2147483647)",
    ),
    (kernel("  if (true) {\n    break;\n  }"), 5, "break outside a loop or switch"),
]


@pytest.mark.parametrize("source, line, message", TYPE_ERRORS)
def test_type_error_names_its_line(source: str, line: int, message: str) -> None:
    with pytest.raises(WgslTypeError) as info:
        parse(source, "k.wgsl")
    assert (info.value.line, info.value.message) == (line, message)
    assert str(info.value) == f"k.wgsl:{line}: {message}"


HAND_WRITTEN = """\
enable f16;

struct P {
  n: u32,
  scale: f32,
}

@group(0) @binding(0) var<storage> src: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f16>;
@group(0) @binding(1) var<storage, read_write> flags: array<i32>;
@group(0) @binding(3) var<uniform> params: P;

// how many elements each invocation handles
const PER: u32 = 4;
const HALF = 0.5;
const SIZE: u32 = PER * 2u;

fn twice(x: f32) -> f32 {
  return x * 2;
}

// A hand-written kernel.
@compute @workgroup_size(64, 1, 1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x * PER;
  if i >= params.n { return; }
  var acc = 0.0;
  var buf: array<f32, SIZE>;
  const limit = 3;
  for (var k = 0u; k < PER; k++) {
    // accumulate
    acc += twice(src[i + k]) * HALF - 1;
    buf[k] = -1.5e-3;
  }
  var count: i32 = limit;
  count -= 1;
  let v = vec4f(acc, 1, 2.0, .5);
  dst[i] = f16(v.x + buf[0]);
  flags[i] = select(-1, i32(-2147483648), acc > 0 && count != 0) << 1u;
}
"""


def test_hand_written_abstract_literals() -> None:
    k, lines = parse_with_lines(HAND_WRITTEN, "dir/hand.wgsl")
    assert k.name == "hand"
    assert [(b.name, b.access) for b in k.bindings] == [
        ("src", "read"),
        ("flags", "read_write"),
        ("dst", "read_write"),
    ]
    assert k.params.name == "P" and k.params.fields == (("n", u32), ("scale", f32))
    assert [(c.name, c.ty, c.value) for c in k.consts[:2]] == [
        ("PER", u32, Lit(4, u32)),
        ("HALF", f32, Lit(0.5, f32)),
    ]
    assert k.consts[0].comment == "how many elements each invocation handles"
    assert k.doc == ("A hand-written kernel.",)
    assert k.workgroup_size == (64, 1, 1) and k.workgroup_size_name is None
    assert k.functions[0].body[0].value == Binary(Op.MUL, Name("x"), Lit(2.0, f32))
    body = k.body
    assert body[2] == Var("acc", f32, Lit(0.0, f32))
    assert body[3] == Var("buf", Array(f32, 8))
    assert body[4] == Let("limit", Lit(3, i32))
    loop = body[5]
    assert isinstance(loop, For) and loop.update == Assign(Name("k"), Lit(1, u32), Op.ADD)
    assert loop.body[0] == Comment("accumulate")
    assert loop.body[2] == Assign(Index(Name("buf"), Name("k")), Lit(-0.0015, f32))
    assert body[7] == Assign(Name("count"), Lit(1, i32), Op.SUB)
    assert body[8].value.ty == Vec(4, f32)
    assert body[8].value.args[1:] == (Lit(1.0, f32), Lit(2.0, f32), Lit(0.5, f32))
    assert body[9].value == Convert(
        k.bindings[2].elem, Binary(Op.ADD, body[9].value.x.a, body[9].value.x.b)
    )
    sel = body[10].value.a
    assert sel.args[:2] == (Lit(-1, i32), Lit(-(2**31), i32))
    assert lines[id(loop)] == 30 and lines[id(loop.body[0])] == 31 and lines[id(body[10])] == 39
    # The emitter's canonical form reads back as the same kernel.
    assert parse(emit(k), "hand.wgsl") == k


def test_every_binary_op_has_a_grammar_alias() -> None:
    from kvdsl.frontend.transform import ToIR

    for op in ops.BINARY_OPS:
        a, b = Name("a"), Name("b")
        built = [
            getattr(ToIR, rule)(None, a, b)
            for rule in dir(ToIR)
            if not rule.startswith("_")
            and getattr(getattr(ToIR, rule), "__doc__", "") == f"``a {ops.info(op).spelling} b``"
        ]
        assert Binary(op, a, b) in built, op


def test_grammar_is_strict_lalr() -> None:
    p = wgsl_parser()
    assert p.options.parser == "lalr" and p.options.strict


def test_the_grammar_is_package_data() -> None:
    """``wgsl.lark`` ships inside the package (read through importlib.resources), so an installed
    kvdsl parses WGSL wherever it is installed."""
    import tomllib

    from kvdsl.frontend.parser import grammar
    from tests.helpers.paths import ROOT as root

    assert grammar() == (root / "kvdsl" / "frontend" / "wgsl.lark").read_text(encoding="utf-8")
    setuptools = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "frontend/wgsl.lark" in setuptools["package-data"]["kvdsl"]
    assert "data-files" not in setuptools


def test_if_else_if_chain_and_comments_keep_their_place() -> None:
    src = kernel(
        "  // first\n  if (gid.x == 0u) {\n    // inside\n    out[1u] = 2u;\n  } else if (gid.x == 1u) {\n"
        "    out[2u] = 3u;\n  } else {\n    // only a comment\n  }\n  // last"
    )
    k = parse(src)
    assert k.body[0] == Comment("first")
    top = k.body[1]
    assert isinstance(top, If) and top.then[0] == Comment("inside")
    (inner,) = top.orelse
    assert isinstance(inner, If) and inner.orelse == (Comment("only a comment"),)
    assert k.body[2] == Comment("last")


# ---- the legacy template ----------------------------------------------------------------------


def _legacy_cases():
    from tests.helpers import legacy

    cases = [
        ("transpose", {}),
        ("transpose", {"vec4": True}),
        ("copy", {}),
        ("copy", {"vendor": "apple"}),
    ]
    cases += [("merge", {}), ("merge_share", {"share_region": "append", "rotary": True})]
    cases += [("build_quant", {"bits": 4, "k_norm": True, "rotary": True}), ("window_shift", {})]
    return legacy, cases


LEGACY, LEGACY_CASES = _legacy_cases()


@pytest.mark.parametrize(
    "mode, kw", LEGACY_CASES, ids=[f"{m}-{sorted(kw)}" for m, kw in LEGACY_CASES]
)
def test_legacy_template_output_parses(mode: str, kw: dict) -> None:
    v = LEGACY.legacy_vars(mode, **kw)
    bindings = LEGACY.legacy_bindings(v)
    text = LEGACY.render(v, bindings, LEGACY.legacy_params_struct(v))
    k = parse(text, f"{mode}.wgsl")
    assert k.bindings == bindings
    assert k.params == LEGACY.legacy_params_struct(v)
    assert k.workgroup_size == (64, 1, 1) and k.workgroup_size_name == "WG"
    # Its canonical re-emission is a fixed point of parse ∘ emit.
    assert parse(emit(k), f"{mode}.wgsl") == k


def test_duplicate_const_is_a_located_error():
    """A const declared twice is a located frontend error, not the verifier's own."""
    from kvdsl import catalog

    src = emit(catalog.build_config(catalog.config("copy_llama31_8b"), "copy_llama31_8b"))
    twice = src.replace("const LANES:", "const WG:", 1)
    with pytest.raises(FrontendError) as err:
        parse(twice)
    line = twice.splitlines().index(next(x for x in twice.splitlines()[::-1] if "const WG:" in x))
    assert err.value.line == line + 1 and "const WG is already declared" in str(err.value)
    with pytest.raises(FrontendError, match="parameter lid is already declared"):
        parse(src.replace("@builtin(workgroup_id) wid", "@builtin(workgroup_id) lid", 1))


@pytest.mark.parametrize(
    "code, lists",
    [
        ("var<workgroup> w: array<vec4<f32>, 64>;", ["var", "vec4", "array"]),
        ("let a = array<vec4<f32>>();", ["vec4", "array"]),  # ">>" closes two
        ("let c = select(a < b, c, d >= e);", ["a"]),
        ("let c = a < b >> c;", ["a"]),
        ("if (a < b) { x = c > d; }", []),  # ")" ends the candidate, ";" and "{" every one
        ("let c = f(a < b) > c;", []),
        ("let c = a < b || c > d;", []),  # "&&" and "||" end the candidates before them
        ("let c = x <= y > z; let d = x << 2u > y;", []),  # "<=", "<<": operators
        ("let c = 0x1Fu < a && 1e-6f < b > c;", []),  # after a number: no candidate
        ("fn f(x: u32) -> vec4<f32> { return vec4<f32>(a < b, c, d, e); }", ["vec4", "vec4"]),
        ("let c = v[a < b, c > d];", ["a"]),  # brackets nest; a comma ends nothing
    ],
)
def test_template_list_discovery(code: str, lists: list[str]) -> None:
    from kvdsl.frontend.errors import template_lists

    found = template_lists(code)
    assert [code[s:lt].strip() for s, lt, _ in found] == lists
    assert all(code[lt] == "<" and code[gt] == ">" for _, lt, gt in found)


def test_block_comments_nest_as_in_wgsl() -> None:
    k = parse(kernel("  /* out[0u] = 2u; /* inner */ out[0u] = 3u; */\n  out[0u] = 1u;"))
    assert k.body == parse(kernel("  out[0u] = 1u;")).body  # the stores of 2u and 3u: comment
    assert parse(kernel("  /* // */ out[0u] = 1u;")).body == k.body  # "//" inside: comment


def test_function_scope_consts_of_consts() -> None:
    # Literals, module consts, earlier function-scope consts and builtins of them: all const.
    k = parse(
        kernel(
            "  const a = 2u;\n  const b = max(a * N, 3u) + u32(1.5f);\n  out[0u] = b;",
            HEAD + "const N: u32 = 4u;\n",
        )
    )
    assert [s.name for s in k.body if isinstance(s, Let)] == ["a", "b"]


def test_while_reads_as_the_for_wgsl_defines_it(gpu) -> None:
    """`while cond { body }` is WGSL's `for (; cond; ) { body }`:
    it parses to that For, prints as it, and runs as the
    interpreter runs it, with a continue and a break on the way."""
    import numpy as np

    from kvdsl.emit import emit
    from kvdsl.interp import run as interp
    from kvdsl.ir.tree import For
    from kvdsl.runtime import run

    body = (
        "  var i = gid.x % 7u;\n  var s = 0u;\n  while i < 40u {\n    i += 3u;\n"
        "    if ((i & 1u) == 0u) {\n      continue;\n    }\n    s += i * gid.x;\n"
        "    if (s > 900u) {\n      break;\n    }\n  }\n  out[gid.x] = s + 1u;"
    )
    text = (
        HEAD + "@compute @workgroup_size(64)\n"
        "fn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n" + body + "\n}\n"
    )
    k = parse(text)
    loop = k.body[2]
    assert isinstance(loop, For) and loop.init is None and loop.update is None
    assert "  for (; i < 40u;) {" in emit(k)
    assert emit(parse(emit(k))) == emit(k)
    from kvdsl.runtime import tint_check

    assert tint_check({"k": text, "emitted": emit(k)}) == {"k": None, "emitted": None}
    bufs = {"out": np.full(128, 0xDEADBEEF, np.uint32)}
    want = interp(k, dict(bufs), None, (2, 1, 1))["out"]
    assert not np.any(want == 0xDEADBEEF) and len(set(want.tolist())) > 50
    assert np.array_equal(run(k, dict(bufs), None, (2, 1, 1))["out"], want)
