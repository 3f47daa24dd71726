"""The WGSL emitter: minimal parentheses by WGSL's grammar, literals, module layout, staleness."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys

import pytest

from kvdsl import catalog, catalog_files
from kvdsl.emit import emit, emit_expr, format_literal
from kvdsl.ir import KernelBuilder, Op, Vec, bool_, f16, f32, i32, u32
from kvdsl.ir.tree import Binary, Call, Construct, Convert, FnCall, Index, Lit, Member
from kvdsl.ir.features import limits
from kvdsl.ir.tree import Name, Unary, WorkgroupVar
from kvdsl.ir.types import array, vec
from tests.helpers.paths import ROOT

a, b, c = Name("a"), Name("b"), Name("c")


def B(op, x, y):
    return Binary(op, x, y)


@pytest.mark.parametrize(
    "expr, text",
    [
        (B(Op.ADD, B(Op.ADD, a, b), c), "a + b + c"),
        (B(Op.SUB, a, B(Op.SUB, b, c)), "a - (b - c)"),
        (B(Op.MUL, B(Op.ADD, a, b), c), "(a + b) * c"),
        (B(Op.ADD, a, B(Op.MUL, b, c)), "a + b * c"),
        (B(Op.DIV, a, B(Op.MUL, b, c)), "a / (b * c)"),
        (B(Op.MOD, B(Op.DIV, a, b), c), "a / b % c"),
        # shifts and bitwise operators take only unary operands in WGSL
        (B(Op.SHL, B(Op.ADD, a, b), c), "(a + b) << c"),
        (B(Op.AND, B(Op.ADD, a, Lit(8, i32)), Lit(15, u32)), "(a + 8i) & 15u"),
        (B(Op.OR, B(Op.AND, a, b), c), "(a & b) | c"),
        (B(Op.AND, B(Op.AND, a, b), c), "a & b & c"),
        (B(Op.OR, a, B(Op.SHL, b, c)), "a | (b << c)"),
        # relations do not chain; && / || chain only with themselves
        (B(Op.LT, B(Op.ADD, a, b), B(Op.SHL, c, a)), "a + b < c << a"),
        # "a < b >> c" would read as a template list "a<b>" (naga refused it): parenthesised
        (B(Op.LT, a, B(Op.SHR, b, c)), "a < (b >> c)"),
        (B(Op.LE, a, B(Op.SHR, b, c)), "a <= (b >> c)"),
        (B(Op.GT, a, B(Op.SHR, b, c)), "a > b >> c"),
        (B(Op.EQ, B(Op.LT, a, b), c), "(a < b) == c"),
        (B(Op.LAND, B(Op.LAND, B(Op.LT, a, b), c), a), "a < b && c && a"),
        (B(Op.LOR, B(Op.LAND, a, b), c), "(a && b) || c"),
        (Unary(Op.NEG, B(Op.ADD, a, b)), "-(a + b)"),
        (Unary(Op.NEG, Lit(-3, i32)), "- -3i"),
        (B(Op.SUB, a, Lit(-3, i32)), "a - -3i"),
        (B(Op.MUL, Lit(-3, i32), a), "-3i * a"),
        (Index(Name("buf"), B(Op.ADD, a, b)), "buf[a + b]"),
        (Member(Name("params"), "seq"), "params.seq"),
        (Call(Op.SELECT, (a, b, B(Op.LT, a, b))), "select(a, b, a < b)"),
        # A "<" relation in an argument before the last opens WGSL's template-list candidate
        # "a<", which a ">" in a later argument closes (Tint and naga refuse such a module):
        # parenthesised there. In the last argument the call's ")" ends the candidate.
        (Call(Op.SELECT, (B(Op.LT, a, b), c, B(Op.GE, b, c))), "select((a < b), c, b >= c)"),
        (Call(Op.SELECT, (B(Op.LAND, c, B(Op.LT, a, b)), c, a)), "select((c && a < b), c, a)"),
        (Call(Op.SELECT, (Call(Op.SELECT, (a, b, B(Op.LT, a, b))), c, a)),
         "select(select(a, b, a < b), c, a)"),  # fmt: skip
        (Call(Op.SELECT, (B(Op.LE, a, b), c, B(Op.GT, b, c))), "select(a <= b, c, b > c)"),
        (Construct(Vec(2, bool_), (B(Op.LT, a, b), B(Op.GT, b, c))), "vec2<bool>((a < b), b > c)"),
        (FnCall("f", (B(Op.LT, a, b), B(Op.LT, b, c))), "f((a < b), b < c)"),
        (Convert(f32, B(Op.ADD, a, b)), "f32(a + b)"),
    ],
)
def test_minimal_parentheses(expr, text):
    assert emit_expr(expr) == text


@pytest.mark.parametrize(
    "value, ty, text",
    [
        (3, u32, "3u"),
        (-2, i32, "-2i"),
        (-(2**31), i32, "i32(-2147483648)"),
        (0.0, f32, "0.0f"),
        (0.1, f32, "0.1f"),
        (1e-6, f32, "1e-06f"),
        (3.0e38, f32, "3e+38f"),
        (1234567.0, f32, "1234567.0f"),
        (0.5, f16, "0.5h"),
        (True, bool_, "true"),
        # f32's largest value: its shortest spelling, 3.4028235e+38, lies past it as a decimal
        # and Tint refuses it.
        (3.4028235e38, f32, "3.4028234663852886e+38f"),
        (-3.4028234663852886e38, f32, "-3.4028234663852886e+38f"),
    ],
)
def test_literals(value, ty, text):
    assert format_literal(value, ty) == text


def test_nonfinite_literal_is_an_error():
    with pytest.raises(ValueError, match="has no WGSL spelling"):
        format_literal(float("inf"), f32)


def test_module_layout_and_f16():
    kb = KernelBuilder("k", 8)
    src = kb.binding("src", f32, "read")
    out = kb.binding("out", f16, "read_write")
    n = kb.const("N", u32, 4, comment="elements per invocation")
    i = kb.let("i", kb.gid.x * n)
    kb.comment("convert")
    out[i] = src[i].to(f16)
    k = kb.build(doc="One conversion.")
    text = emit(k)
    assert text == (
        "enable f16;\n\n"
        "@group(0) @binding(0) var<storage, read> src: array<f32>;\n"
        "@group(0) @binding(1) var<storage, read_write> out: array<f16>;\n\n"
        "// elements per invocation\n"
        "const N: u32 = 4u;\n\n"
        "// One conversion.\n"
        "@compute @workgroup_size(8)\n"
        "fn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
        "  let i = gid.x * N;\n"
        "  // convert\n"
        "  out[i] = f16(src[i]);\n"
        "}\n"
    )
    assert emit(k) == text  # deterministic


def test_no_enable_without_f16():
    assert "enable f16" not in emit(catalog.build("transpose_llama31_8b"))
    assert emit(catalog.build("transpose_f16_llama31_8b")).startswith("enable f16;\n")


def test_emitted_folder_is_current():
    proc = subprocess.run(
        [sys.executable, "-m", "kvdsl", "emit", "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr


def test_stale_folder_gives_a_diff(tmp_path):
    catalog_files.write(tmp_path)
    assert catalog_files.stale(tmp_path) == ""
    victim = tmp_path / "copy_llama31_8b.wgsl"
    victim.write_text(victim.read_text().replace("HEAD_DIM: u32 = 128u", "HEAD_DIM: u32 = 127u"))
    (tmp_path / "old_variant.wgsl").write_text("// gone\n")
    module = tmp_path / "kvdsl.js"
    module.write_text(module.read_text().replace("const COMPUTE = 4;", "const COMPUTE = 2;"))
    (tmp_path / "kvdsl.d.ts").unlink()
    npm = tmp_path / "package.json"
    npm.write_text(npm.read_text().replace('"version": "', '"version": "9', 1))
    diff = catalog_files.stale(tmp_path)
    assert "package.json (kvdsl emit)" in diff and '-  "version": "9' in diff
    assert "-const HEAD_DIM: u32 = 127u;" in diff and "+const HEAD_DIM: u32 = 128u;" in diff
    assert "-const COMPUTE = 2;" in diff and "+const COMPUTE = 4;" in diff
    assert "kvdsl.d.ts (kvdsl emit)" in diff
    assert "old_variant.wgsl (on disk)" in diff
    proc = subprocess.run(
        [sys.executable, "-m", "kvdsl", "emit", "--check", "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1 and "is stale" in proc.stderr and "+const HEAD_DIM" in proc.stdout
    catalog_files.write(tmp_path)
    assert catalog_files.stale(tmp_path) == "" and not (tmp_path / "old_variant.wgsl").exists()


def test_index_names_the_features_each_module_enables():
    """index.json's ``features`` are the WebGPU features the module's ``enable`` lines need."""
    index = json.loads((ROOT / "emitted" / "index.json").read_text())
    wanted = {"f16": "shader-f16", "subgroups": "subgroups"}
    seen = set()
    for name, entry in index.items():
        text = (ROOT / "emitted" / f"{name}.wgsl").read_text()
        enables = re.findall(r"^enable (\w+);", text, re.MULTILINE)
        assert entry["features"] == [wanted[e] for e in enables], name
        seen.update(entry["features"])
    assert seen == {"shader-f16", "subgroups"}
    assert index["merge_share_append_rotary_flat_f16_llama31_8b"]["features"] == []  # words
    assert index["transpose_vec4_f16_llama31_8b"]["features"] == ["shader-f16"]  # a drop-in


def test_relations_in_arguments_compile_under_naga_and_tint():
    # A generated kernel Tint refused, as a kernel of its own:
    # "select(vi < 0i, t, 0u >= n)" was read as the template list "vi<...>".
    from kvdsl.ir import select
    from kvdsl.runtime import compile_wgsl, tint_check

    kb = KernelBuilder("k", 64)
    inp = kb.binding("inp", i32, "read")
    out = kb.binding("out", u32, "read_write")
    n = kb.param("n")
    vi = kb.let("vi", inp[kb.gid.x])
    cond = kb.let("cond", select(vi < 0, vi > 7, kb.gid.x >= n))
    out[kb.gid.x] = select(0, 1, cond).to(u32)
    text = emit(kb.build())
    assert "select((vi < 0i), vi > 7i, gid.x >= params.n)" in text
    compile_wgsl(text)
    assert tint_check({"k": text}) == {"k": None}


_WGSL_BYTES = {"f32": 4, "i32": 4, "u32": 4, "f16": 2}


def _element_bytes(ty: str) -> int:
    """Bytes of a workgroup array's element as WGSL lays it out (vec3 aligned as vec4)."""
    m = re.fullmatch(r"vec([234])<(\w+)>", ty)
    if m is None:
        return _WGSL_BYTES[ty]
    n = int(m.group(1))
    return (4 if n == 3 else n) * _WGSL_BYTES[m.group(2)]


def test_index_states_the_limits_each_module_needs():
    """index.json's ``limits`` are what the WGSL text needs past WebGPU's defaults, counted from
    the text: its storage bindings, workgroup memory and workgroup size. Only the template's
    9-10-binding drop-ins need any."""
    index = json.loads((ROOT / "emitted" / "index.json").read_text())
    needing = {}
    for name, entry in index.items():
        text = (ROOT / "emitted" / f"{name}.wgsl").read_text()
        consts = {c: int(n) for c, n in re.findall(r"^const (\w+): u32 = (\d+)u;", text, re.M)}
        size = re.search(r"@workgroup_size\(([^)]*)\)", text).group(1).split(",")
        x, y, z = ([consts.get(s.strip()) or int(s.strip().rstrip("u")) for s in size] + [1, 1])[:3]
        shared = sum(
            -(-_element_bytes(ty) * int(n) // 16) * 16
            for ty, n in re.findall(r"^var<workgroup> \w+: array<(.+), (\d+)>;", text, re.M)
        )
        need = {
            "maxStorageBuffersPerShaderStage": len(re.findall(r"var<storage,", text)),
            "maxComputeWorkgroupStorageSize": shared,
            "maxComputeInvocationsPerWorkgroup": x * y * z,
            "maxComputeWorkgroupSizeX": x,
            "maxComputeWorkgroupSizeY": y,
            "maxComputeWorkgroupSizeZ": z,
        }
        defaults = {"maxStorageBuffersPerShaderStage": 8, "maxComputeWorkgroupStorageSize": 16384}
        defaults |= {"maxComputeInvocationsPerWorkgroup": 256, "maxComputeWorkgroupSizeX": 256}
        defaults |= {"maxComputeWorkgroupSizeY": 256, "maxComputeWorkgroupSizeZ": 64}
        assert entry["limits"] == {k: n for k, n in need.items() if n > defaults[k]}, name
        assert shared > 0 or "var<workgroup>" not in text, name
        if entry["limits"]:
            needing[name] = entry["limits"]
    assert set(needing) == {n for n in index if "_template_bindings_" in n}
    for name, need in needing.items():
        count = 9 if name.startswith("build_quant") else 10
        assert need == {"maxStorageBuffersPerShaderStage": count}, name


def test_limits_past_each_default():
    """:func:`kvdsl.ir.features.limits` names each limit a kernel passes, by its need (the
    verifier holds built kernels to the default workgroup size and memory: a kernel replaced
    past them stands for a parsed one)."""
    kb = KernelBuilder("k", 256)
    bufs = [kb.binding(f"b{i}", u32, "read_write") for i in range(9)]
    for b in bufs:
        b[kb.gid.x] = b[kb.gid.x] + 1
    k = kb.build()
    assert limits(k) == {"maxStorageBuffersPerShaderStage": 9}
    # vec3 elements take 16 bytes; each var is rounded up to 16 bytes (5 u32: 32).
    shared = (WorkgroupVar("w", array(vec(3, f32), 1024)), WorkgroupVar("u", array(u32, 5)))
    big = dataclasses.replace(
        k, bindings=k.bindings[:8], workgroup_size=(16, 32, 65), workgroup_vars=shared
    )
    assert limits(big) == {
        "maxComputeWorkgroupStorageSize": 1024 * 16 + 32,
        "maxComputeInvocationsPerWorkgroup": 16 * 32 * 65,
        "maxComputeWorkgroupSizeZ": 65,
    }
    fits = dataclasses.replace(k, bindings=k.bindings[:8], workgroup_size=(256, 1, 1))
    assert limits(fits) == {}
