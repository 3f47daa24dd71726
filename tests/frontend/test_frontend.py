"""Hand-written WGSL and the legacy template parse; the literal typing, the grammar's shape and
the comment and template-list scans. The syntax errors, type errors and constructs outside the
subset, each at its place, are conformance cases (``cases/syntax_errors/``,
``cases/type_errors/``, ``cases/outside_the_subset/``, run by ``test_wgsl_cases.py``)."""

from __future__ import annotations

import pytest

from kvdsl.emit import emit
from kvdsl.frontend import FrontendError, parse, parse_with_lines
from kvdsl.frontend.parser import wgsl_parser
from kvdsl.ir import ops
from kvdsl.ir.tree import Assign, Binary, Comment, Convert, For, If, Index, Let, Lit, Name, Var
from kvdsl.ir.ops import Op
from kvdsl.ir.types import Array, Vec, f32, i32, u32
from tests.helpers.wgsl import HEAD, kernel

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
