"""The command line: every command, and bad input as one line with exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from kvdsl.cli.check import NOT_RUN
from kvdsl.ir.portability import CONSTANT_UNPACK
from kvdsl.reference.judge import poison
from tests.helpers.paths import ROOT


def kvdsl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kvdsl", *args], cwd=ROOT, capture_output=True, text=True
    )


def test_list_and_json():
    out = kvdsl("list")
    assert out.returncode == 0 and "transpose_vec4_llama31_8b" in out.stdout
    data = json.loads(kvdsl("list", "--json").stdout)
    assert data["copy_per_row_gemma2_2b"] == {
        "mode": "copy",
        "head_dim": 256,
        "walk": "per_row",
        "present_type": "f32",
        "workgroup_size": 64,
        "fold": 65535,
    }


def test_show_matches_emitted_file():
    out = kvdsl("show", "copy_llama31_8b")
    assert out.returncode == 0
    assert out.stdout == (ROOT / "emitted" / "copy_llama31_8b.wgsl").read_text()


@pytest.mark.parametrize("backend", ["gpu", "interp"])
def test_run_writes_outputs(tmp_path, backend):
    rng = np.random.default_rng(1)
    shape = (2, 5, 2 * 64)
    key = (rng.uniform(0.5, 2, shape) * rng.choice([-1, 1], shape)).astype(np.float32)
    value = (rng.uniform(0.5, 2, shape) * rng.choice([-1, 1], shape)).astype(np.float32)
    np.savez(
        tmp_path / "in.npz",
        key=key,
        value=value,
        present_key=poison(key.size, np.float32),
        present_value=poison(key.size, np.float32),
    )
    out = kvdsl(
        "run",
        "transpose_qwen25_05b",
        "--inputs",
        str(tmp_path / "in.npz"),
        "--params",
        '{"batchSize": 2, "kvSeq": 5}',
        "--out",
        str(tmp_path / "out.npz"),
        "--backend",
        backend,
    )
    assert out.returncode == 0, out.stderr
    with np.load(tmp_path / "out.npz") as res:
        assert sorted(res.files) == ["present_key", "present_value"]
        for name, x in (("present_key", key), ("present_value", value)):
            want = x.reshape(2, 5, 2, 64).transpose(0, 2, 1, 3).reshape(-1)
            assert np.array_equal(res[name], want), name


def test_run_both_backends_compares_them(tmp_path):
    # --backend both: every read_write buffer on the GPU and in the interpreter, one line each,
    # exit 0 where they agree; --out holds both (the interpreter's as interp.NAME).
    rng = np.random.default_rng(2)
    shape = (2, 5, 2 * 64)
    key = (rng.uniform(0.5, 2, shape) * rng.choice([-1, 1], shape)).astype(np.float32)
    np.savez(
        tmp_path / "in.npz",
        key=key,
        value=key + 1,
        present_key=poison(key.size, np.float32),
        present_value=poison(key.size, np.float32),
    )
    args = ["run", "transpose_qwen25_05b", "--inputs", str(tmp_path / "in.npz"), "--params"]
    args += ['{"batchSize": 2, "kvSeq": 5}', "--backend", "both"]
    out = kvdsl(*args, "--out", str(tmp_path / "out.npz"))
    assert out.returncode == 0, out.stderr
    assert "present_key: float32[1280], GPU == interpreter" in out.stdout, out.stdout
    assert "present_value: float32[1280], GPU == interpreter" in out.stdout, out.stdout
    with np.load(tmp_path / "out.npz") as res:
        assert sorted(res.files) == [
            "interp.present_key",
            "interp.present_value",
            "present_key",
            "present_value",
        ]
        want = key.reshape(2, 5, 2, 64).transpose(0, 2, 1, 3).reshape(-1)
        for prefix in ("", "interp."):
            assert np.array_equal(res[prefix + "present_key"], want), prefix
            assert np.array_equal(res[prefix + "present_value"], want + 1), prefix
    for bad, why in (("-1", "--tol=-1.0"), ("nan", "--tol=nan")):
        err = kvdsl(*args, "--tol", bad)
        assert err.returncode == 2 and why in err.stderr and "0 or more" in err.stderr, err.stderr
    err = kvdsl(*args[:-2], "--tol", "0.1")
    assert err.returncode == 2 and "with --backend both only" in err.stderr


def test_run_both_backends_reports_where_they_differ(tmp_path):
    # An unpack of a word fixed when the shader compiles: llvmpipe (CI's driver) gives its high
    # lane 0.0, so the outputs differ there, exit 1, and the portability note names the line;
    # an adapter that unpacks it right agrees (exit 0).
    src = tmp_path / "k.wgsl"
    src.write_text(
        "@group(0) @binding(0) var<storage, read> a: array<f32>;\n"
        "@group(0) @binding(1) var<storage, read_write> out: array<f32>;\n"
        "@compute @workgroup_size(64)\n"
        "fn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
        "  let w = 0x38003400u;\n"
        "  out[gid.x] = a[gid.x] * unpack2x16float(w).y;\n"
        "}\n"
    )
    np.savez(tmp_path / "in.npz", a=np.arange(64, dtype=np.float32), out=np.zeros(64, np.float32))
    out = kvdsl(
        "run", str(src), "--inputs", str(tmp_path / "in.npz"), "--workgroups", "1,1,1",
        "--backend", "both",
    )  # fmt: skip
    if out.returncode == 0:  # an adapter that unpacks it right
        assert out.stdout.strip() == "out: float32[64], GPU == interpreter", out.stdout
        return
    assert out.returncode == 1, out.stderr
    first, *notes = out.stdout.strip().splitlines()
    assert first.startswith("out: float32[64], 63 of 64 elements differ, first at 1: GPU ")
    assert first.endswith("GPU 0.0, interpreter 0.5"), first
    assert notes == [f"{src}:6: note: {CONSTANT_UNPACK} [portability]"], notes


def test_run_gives_overrides_their_constants(tmp_path, gpu):
    # override declarations take --constants by name or @id; one with no initialiser and no
    # value, and a value for no override, are usage errors naming them.
    src = tmp_path / "scale.wgsl"
    src.write_text(
        "override WG: u32 = 64u;\n"
        "@id(3) override SCALE: f32;\n"
        "@group(0) @binding(0) var<storage, read> a: array<f32>;\n"
        "@group(0) @binding(1) var<storage, read_write> out: array<f32>;\n"
        "@compute @workgroup_size(WG)\n"
        "fn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
        "  out[gid.x] = a[gid.x] * SCALE;\n"
        "}\n"
    )
    a = np.random.default_rng(1).standard_normal(128).astype(np.float32)
    np.savez(tmp_path / "in.npz", a=a, out=np.full(128, np.nan, np.float32))
    base = ["run", str(src), "--inputs", str(tmp_path / "in.npz"), "--workgroups", "1,1,1"]
    res = tmp_path / "out.npz"
    out = kvdsl(*base, "--backend", "both", "--constants", "WG=128,3=-2.5", "--out", str(res))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == "out: float32[128], GPU == interpreter", out.stdout
    np.testing.assert_array_equal(np.load(res)["out"], a * np.float32(-2.5))
    missing = kvdsl(*base, "--backend", "interp")
    assert missing.returncode == 2
    assert "override SCALE has no initialiser and no value was given for it" in missing.stderr
    stray = kvdsl(*base, "--backend", "interp", "--constants", "SCALE=1,SIZE=3")
    assert stray.returncode == 2
    assert "constants: no override named SIZE (the module's: SCALE, WG)" in stray.stderr


def test_run_both_backends_interprets_at_the_adapters_subgroup_size(tmp_path, gpu):
    # A kernel whose outputs depend on the subgroup size (its builtin, and a shuffle by a mask
    # that crosses 4 lanes) agrees with the interpreter run at the adapter's size, which
    # --backend both measures; --subgroup-size sets the interpreter's (and 3, or with the GPU
    # alone, is a usage error).
    from kvdsl.runtime import subgroup_size

    assert gpu["subgroups"], "the adapter has no subgroups feature"
    src = tmp_path / "sg.wgsl"
    src.write_text(
        "enable subgroups;\n"
        "@group(0) @binding(0) var<storage, read_write> out: array<u32>;\n"
        "@compute @workgroup_size(64)\n"
        "fn main(@builtin(global_invocation_id) gid: vec3<u32>,\n"
        "        @builtin(subgroup_size) sg: u32) {\n"
        "  out[gid.x] = sg * 1000u + subgroupShuffleXor(out[gid.x], 4u);\n"
        "}\n"
    )
    np.savez(tmp_path / "in.npz", out=np.arange(128, dtype=np.uint32) * 7)
    args = ["run", str(src), "--inputs", str(tmp_path / "in.npz"), "--workgroups", "2,1,1"]
    out = kvdsl(*args, "--backend", "both")
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip() == "out: uint32[128], GPU == interpreter", out.stdout
    size = subgroup_size()
    other = 16 if size != 16 else 32  # a mask of 4 needs 8 lanes or more
    out = kvdsl(*args, "--backend", "both", "--subgroup-size", str(other))
    assert out.returncode == 1 and "128 of 128 elements differ" in out.stdout, out.stdout
    out = kvdsl(*args, "--backend", "interp", "--subgroup-size", str(size), "--out",
                str(tmp_path / "o.npz"))  # fmt: skip
    assert out.returncode == 0, out.stderr
    with np.load(tmp_path / "o.npz") as res:
        lanes = np.arange(128)
        assert np.array_equal(res["out"], size * 1000 + (lanes ^ 4) * 7)
    for bad, why in (("3", "a power of two in 4..128"), ("256", "a power of two in 4..128")):
        err = kvdsl(*args, "--backend", "interp", "--subgroup-size", bad)
        assert err.returncode == 2 and why in err.stderr, err.stderr
    err = kvdsl(*args, "--subgroup-size", "8")
    assert err.returncode == 2 and "with --backend interp or both only" in err.stderr


@pytest.fixture
def inputs(tmp_path):
    a = np.ones(64 * 4, np.float32)
    np.savez(tmp_path / "in.npz", src_k=a, src_v=a, present_key=a, present_value=a)
    np.savez(
        tmp_path / "bad_dtype.npz",
        src_k=a.astype(np.int32),
        src_v=a,
        present_key=a,
        present_value=a,
    )
    (tmp_path / "notnpz.npz").write_text("hello")
    (tmp_path / "binary.wgsl").write_bytes(bytes([0xDA, 0x00, 0xFF, 0x10]))
    return tmp_path


@pytest.mark.parametrize(
    "args, message",
    [
        (["show", "nope"], "unknown variant 'nope' (see `kvdsl list`)"),
        (["run", "copy_llama32_1b", "--inputs", "{d}/missing.npz"], "--inputs: no such file"),
        (["run", "copy_llama32_1b", "--inputs", "{d}/notnpz.npz"], "is not an .npz archive"),
        (
            ["run", "copy_llama32_1b", "--inputs", "{d}/in.npz", "--params", "{count: 4}"],
            "--params: not valid JSON",
        ),
        (
            ["run", "copy_llama32_1b", "--inputs", "{d}/in.npz", "--params", "[4]"],
            "--params: expected a JSON object",
        ),
        (
            ["run", "copy_llama32_1b", "--inputs", "{d}/in.npz", "--params", "{}"],
            "params field 'count'",
        ),
        (
            ["run", "copy_llama32_1b", "--inputs", "{d}/bad_dtype.npz", "--params", '{"count": 4}'],
            "src_k",
        ),
        (
            ["run", "copy_llama32_1b", "--inputs", "{d}/in.npz", "--workgroups", "1,2"],
            "--workgroups='1,2': expected three non-negative integers",
        ),
        (["verify", "nope"], "unknown variant 'nope'"),
        (
            ["verify", "copy_llama32_1b", "--skip", "interp", "--skip", "gpu"],
            "--skip: leaving out both interp and gpu compares nothing; leave out one at most",
        ),
        (["emit", "--out", "{d}/notnpz.npz/sub"], "--out: cannot write to "),
        (["legacy", "--vars", "{d}/binary.wgsl"], "--vars: '"),
        (
            ["run", "copy_llama32_1b", "--inputs", "{d}/in.npz", "--params", "{d}/binary.wgsl"],
            "binary.wgsl' is not UTF-8 text (byte 0)",
        ),
        (["check", "{d}/binary.wgsl"], "binary.wgsl' is not UTF-8 text (byte 0): WGSL source is"),
        (
            ["run", "{d}/binary.wgsl", "--inputs", "{d}/in.npz", "--workgroups", "1,1,1"],
            "binary.wgsl' is not UTF-8 text (byte 0)",
        ),
        (
            ["run", "copy_llama32_1b", "--inputs", "{d}/in.npz", "--params", '{"count": 4}']
            + ["--out", "{d}/no/such/folder/out.npz"],
            "--out: cannot write '",
        ),
    ],
)
def test_bad_input_is_one_line_exit_2(inputs, args, message):
    out = kvdsl(*(a.replace("{d}", str(inputs)) for a in args))
    assert out.returncode == 2, out.stderr
    assert message in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr


def test_legacy_prints_kvdsl_wgsl_for_template_variables():
    vars = {
        "mode": "merge_share",
        "shareRegion": "append",
        "hasRotary": True,
        "half": 32,
        "headDim": 64,
        "kvHeads": 2,
        "tunables": {"COPY_WORKGROUP_SIZE": 64},
        "DISPATCH_FOLD_WIDTH": 65535,
        "device": {"adapterInfo": {"vendor": "apple"}},
    }
    out = kvdsl("legacy", "--vars", json.dumps(vars))
    assert out.returncode == 0, out.stderr
    assert '"walk": "hybrid"' in out.stdout and '"rotary": true' in out.stdout
    assert "@group(0) @binding(3) var<storage, read> cos_cache: array<vec4<f32>>;" in out.stdout
    assert "@compute @workgroup_size(LANES)" in out.stdout


def test_legacy_gives_partial_rotary_and_windows_fixed_meanings():
    from tests.helpers.legacy import legacy_vars

    phi2 = legacy_vars("build", kv_heads=32, head_dim=80, rotary=True, half=16)
    out = kvdsl("legacy", "--vars", json.dumps(phi2))
    assert out.returncode == 0, out.stderr
    assert '"rotary_half": 16' in out.stdout and "const HALF: u32 = 16u;" in out.stdout
    for region, rotary in (("all", True), ("append", False)):
        v = legacy_vars("window_shift", shift_region=region, rotary=rotary)
        out = kvdsl("legacy", "--vars", json.dumps(v))
        assert out.returncode == 0, out.stderr
        assert f'"region": "{region}", "rotary": {str(rotary).lower()}' in out.stdout
        # 'all' with rotary reads one packed rotary_table (8 storage buffers), said on stderr.
        assert ("rotary_table" in out.stdout) is rotary and "cos_cache" not in out.stdout
        assert ("bindings differ from the template's: rotary_table" in out.stderr) is rotary
    out = kvdsl("legacy", "--vars", json.dumps(phi2 | {"half": 41}))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "half=41: expected a whole number from 1 to headDim / 2 = 40" in out.stderr


def test_legacy_subgroups_sums_the_k_norm_across_the_subgroup():
    from tests.helpers.legacy import legacy_vars

    knorm = json.dumps(legacy_vars("build", kv_heads=8, head_dim=128, k_norm=True))
    out = kvdsl("legacy", "--vars", knorm, "--subgroups")
    assert out.returncode == 0, out.stderr
    assert '"reduction": "subgroup"' in out.stdout and out.stdout.count("enable subgroups;") == 1
    assert "subgroupShuffleXor" in out.stdout
    assert '{"items": "count", "per_workgroup": 64, "fold": 65535, "balanced": false}' in out.stdout
    plain = kvdsl("legacy", "--vars", knorm)
    assert plain.returncode == 0 and "subgroupShuffleXor" not in plain.stdout
    out = kvdsl("legacy", "--vars", json.dumps(legacy_vars("copy", head_dim=64)), "--subgroups")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "--subgroups: expected variables of a K RMSNorm kernel" in out.stderr
    # A row of 512 vectors: the drop-in keeps the per-row walk, which has no such reduction.
    big = json.dumps(legacy_vars("build", kv_heads=1, head_dim=2048, k_norm=True))
    out = kvdsl("legacy", "--vars", big, "--subgroups")
    assert out.returncode == 2 and "reduction='subgroup': expected 'workgroup' unless" in out.stderr


def test_legacy_max_storage_buffers_picks_the_drop_in_or_the_packed_kernel():
    """Without a stated limit the quantising rotary kernel binds the packed 8, and the header
    and one stderr line say how its bindings differ and how to get the drop-in; with
    --max-storage-buffers 10 it is the template's 10-binding drop-in, whose header states the
    limit to request."""
    from tests.helpers.legacy import legacy_vars

    v = json.dumps(legacy_vars("append_quant", kv_heads=2, head_dim=64, k_norm=True, rotary=True))
    packed = kvdsl("legacy", "--vars", v)
    assert packed.returncode == 0, packed.stderr
    note = packed.stderr.strip()
    assert len(note.splitlines()) == 1
    assert note.startswith("kvdsl legacy: note: bindings differ from the template's: ")
    assert note.endswith("pass --max-storage-buffers 10 (or more)")
    header = packed.stdout.split("\n\n")[0]
    assert note.removeprefix("kvdsl legacy: note: ") in header and '"bindings": "packed"' in header
    assert packed.stdout.count("var<storage,") == 8 and "rotary_table" in packed.stdout
    assert "limits past" not in header
    for most in ("8", "9"):
        same = kvdsl("legacy", "--vars", v, "--max-storage-buffers", most)
        assert (
            same.returncode == 0 and same.stdout == packed.stdout and same.stderr == packed.stderr
        )
    drop_in = kvdsl("legacy", "--vars", v, "--max-storage-buffers", "10")
    assert drop_in.returncode == 0 and drop_in.stderr == ""
    header = drop_in.stdout.split("\n\n")[0]
    assert '"bindings": "template"' in header and "differ" not in header
    assert 'to request of the device: {"maxStorageBuffersPerShaderStage": 10}' in header
    assert drop_in.stdout.count("var<storage,") == 10 and "cos_cache" in drop_in.stdout
    plain = kvdsl("legacy", "--vars", json.dumps(legacy_vars("build_quant", head_dim=64)))
    assert plain.returncode == 0 and plain.stderr == "" and "differ" not in plain.stdout


@pytest.mark.parametrize("most", ["7", "0", "-1", "eight", "9.5", ""])
def test_legacy_bad_max_storage_buffers_is_one_line(most):
    from tests.helpers.legacy import legacy_vars

    v = json.dumps(legacy_vars("build_quant", head_dim=64, k_norm=True, rotary=True))
    out = kvdsl("legacy", "--vars", v, "--max-storage-buffers", most)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr == (
        f"kvdsl legacy: --max-storage-buffers {most}: expected a whole number, 8 or more: the "
        "device's maxStorageBuffersPerShaderStage (WebGPU guarantees 8)\n"
    )
    assert "int" not in out.stderr.replace("maxStorage", "")


@pytest.mark.parametrize(
    "vars, message",
    [
        ('{"mode": "copy", "headDm": 64}', "headDm=64: expected a variable the template reads"),
        ('{"mode": "nope"}', "mode='nope': expected one of"),
        ("[1]", "--vars: expected a JSON object"),
    ],
)
def test_legacy_bad_variables(vars, message):
    out = kvdsl("legacy", "--vars", vars)
    assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr


def test_check_reports_every_validator(tmp_path):
    good = tmp_path / "good.wgsl"
    good.write_text(kvdsl("show", "copy_llama31_8b").stdout)
    out = kvdsl("check", str(good))
    assert out.returncode == 0 and "1 passed, 0 failed" in out.stdout
    bad = tmp_path / "bad.wgsl"
    bad.write_text(good.read_text().replace("= src_k[e];", "= src_k[e] + 1i;", 1))
    out = kvdsl("check", str(bad))
    assert out.returncode == 1
    lines = out.stdout.splitlines()
    assert any(
        line.endswith("[kvdsl]") and "+ operands of different types: vec4<f32>, i32" in line
        for line in lines
    )
    assert any(line.endswith("[naga]") for line in lines)
    assert any(line.endswith("[tint]") for line in lines)


def passing_check_notes(f) -> tuple:
    """``kvdsl check f``'s output, which must pass the file, and its portability notes."""
    out = kvdsl("check", str(f))
    assert out.returncode == 0 and "1 passed, 0 failed" in out.stdout, out.stdout
    return out, [line for line in out.stdout.splitlines() if line.endswith("[portability]")]


def test_check_notes_what_an_implementation_runs_wrong(tmp_path):
    # Valid WGSL that naga on NVIDIA (a signed %, an i32 abs), Dawn on NVIDIA (an i32 max of an
    # abs) or llvmpipe (an unpack of a fixed word) ran otherwise: notes with their lines, and
    # the file still passes.
    f = tmp_path / "signed.wgsl"
    f.write_text(
        "@group(0) @binding(0) var<storage, read_write> out: array<i32>;\n"
        "@compute @workgroup_size(1)\n"
        "fn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
        "  let a = i32(gid.x) - 3i;\n"
        "  out[0] = a % 2i;\n"
        "  out[1] = max(a, abs(out[2]));\n"
        "  let w = 0x38003400u;\n"
        "  out[3] = i32(unpack2x16float(w).y);\n"
        "}\n"
    )
    out, notes = passing_check_notes(f)
    assert len(notes) == 4, out.stdout
    assert notes[0].startswith(f"{f}:5: note: a % of i32 values") and "OpSRem" in notes[0]
    assert notes[1].startswith(f"{f}:6: note: an i32 abs: WGSL leaves i32's least value")
    assert notes[2].startswith(f"{f}:6: note: an i32 max or min of an abs")
    assert notes[3].startswith(f"{f}:8: note: unpack2x16float of a word the compiler knows")
    good = tmp_path / "good.wgsl"
    good.write_text(kvdsl("show", "append_quant_int8_llama31_8b").stdout)
    assert "[portability]" not in kvdsl("check", str(good)).stdout


def test_check_notes_kvdsl_house_rules_in_foreign_wgsl(tmp_path):
    # WGSL takes a read_write binding the kernel only reads and a binding nothing uses (Tint
    # and naga compile it); kvdsl's own kernels may not have either: notes, and the file
    # passes.
    f = tmp_path / "reads.wgsl"
    f.write_text(
        "@group(0) @binding(0) var<storage, read_write> x: array<f32>;\n"
        "@group(0) @binding(1) var<storage, read> spare: array<f32>;\n"
        "@group(0) @binding(2) var<storage, read_write> out: array<f32>;\n"
        "@compute @workgroup_size(64)\n"
        "fn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
        "  out[gid.x] = x[gid.x] * 2.0;\n"
        "}\n"
    )
    out, portability = passing_check_notes(f)
    notes = [line for line in out.stdout.splitlines() if line.endswith("[house]")]
    assert portability == [] and notes == [
        f"{f}: note: binding 'x' is read_write but never written (WGSL takes it; kvdsl refuses "
        "it in its own kernels) [house]",
        f"{f}: note: binding 'spare' is declared but never used (WGSL takes it; kvdsl refuses "
        "it in its own kernels) [house]",
    ], out.stdout


def test_check_notes_f16_literals_whose_digits_are_not_an_f16_value(tmp_path):
    # Tint reads such digits rounded toward zero, naga to nearest: a note for each,
    # with its line (a module const, a suffixed literal, an abstract one typed f16), none for
    # digits that are an f16 value.
    f = tmp_path / "halves.wgsl"
    f.write_text(
        "enable f16;\n"
        "const K: f16 = 0.1h;\n"
        "@group(0) @binding(0) var<storage, read_write> out: array<f32>;\n"
        "@compute @workgroup_size(1)\n"
        "fn main() {\n"
        "  let a = 31.62h;\n"
        "  let b: f16 = 2.7;\n"
        "  let c = 31.625h + 0.5h + 65504.0h * 0.0h;\n"
        "  out[0] = f32(a + b + c + K);\n"
        "}\n"
    )
    out, notes = passing_check_notes(f)
    assert [n.split(": an f16 literal")[0] for n in notes] == [
        f"{f}:2: note: 0.1 (nearest f16 0.0999755859375)",
        f"{f}:6: note: 31.62 (nearest f16 31.625)",
        f"{f}:7: note: 2.7 (nearest f16 2.69921875)",
    ], out.stdout
    assert "rounds it toward zero" in notes[0]


def test_check_takes_an_entry_point_of_any_name(tmp_path):
    # WebGPU takes a module's one compute entry point whatever its name; naga's pipeline was
    # created for "main" and refused a valid module ("Unable to find entry point 'main'").
    src = tmp_path / "named.wgsl"
    src.write_text(
        "@group(0) @binding(0) var<storage, read_write> out: array<u32>;\n"
        "@compute @workgroup_size(64)\n"
        "fn kernel_main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
        "  out[gid.x] = gid.x * 2u;\n"
        "}\n"
    )
    out = kvdsl("check", str(src))
    assert out.returncode == 0 and out.stdout.splitlines() == [
        f"{src}: passed: checked by kvdsl's parser and verifier, naga (wgpu-native) and Tint "
        "(Dawn)",
        NOT_RUN,
        "1 passed, 0 failed",
    ], out.stdout
    bad = tmp_path / "joined.wgsl"  # "const" run into its name: WGSL and kvdsl refuse it
    bad.write_text("constN: u32 = 4u;\n" + src.read_text())
    out = kvdsl("check", str(bad))
    assert out.returncode == 1
    lines = out.stdout.splitlines()
    assert any(line.endswith("[kvdsl]") and "unexpected 'constN'" in line for line in lines)
    assert any(line.endswith("[naga]") for line in lines)
    assert any(line.endswith("[tint]") for line in lines)


def test_run_wgsl_file_reports_out_of_bounds_with_its_line(tmp_path):
    src = tmp_path / "oob.wgsl"
    src.write_text(
        "@group(0) @binding(0) var<storage, read> src: array<f32>;\n"
        "@group(0) @binding(1) var<storage, read_write> dst: array<f32>;\n"
        "\n"
        "@compute @workgroup_size(4)\n"
        "fn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
        "  let i = gid.x;\n"
        "  dst[i + 1u] = src[i] * 2.0;\n"
        "}\n"
    )
    np.savez(tmp_path / "in.npz", src=np.ones(8, np.float32), dst=np.zeros(8, np.float32))
    args = ["run", str(src), "--inputs", str(tmp_path / "in.npz"), "--workgroups", "2,1,1"]
    out = kvdsl(*args, "--backend", "interp")
    assert out.returncode == 1 and "dst" in out.stderr and "8" in out.stderr
    assert "line 7" in out.stderr, out.stderr
    missing = kvdsl(*args[:4])
    assert missing.returncode == 2 and "give --workgroups" in missing.stderr


def test_verify_prints_a_table_and_passes():
    names = [
        "copy_llama32_1b",
        "merge_share_append_rotary_flat_llama31_8b",
        "build_knorm_qwen3_06b",
    ]
    out = kvdsl("verify", *names, "--cases", "2")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split()[:2] == ["variant", "shapes"] and lines[-1] == "3 passed, 0 failed"
    assert all(any(line.startswith(n) and line.endswith("ok") for line in lines) for n in names)


def test_json_options_take_long_text_and_name_unreadable_paths():
    # JSON text past 255 bytes used to be taken for a file name (OSError: an internal error).
    vars = {"mode": "copy", "headDim": 64, "headDm": 1, "padding": "x" * 300}
    out = kvdsl("legacy", "--vars", json.dumps(vars))
    assert out.returncode == 2 and "expected a variable the template reads" in out.stderr
    out = kvdsl("legacy", "--vars", "y" * 300)
    assert out.returncode == 2 and "--vars: cannot read 'yyy" in out.stderr
    assert "Traceback" not in out.stderr and "internal error" not in out.stderr


@pytest.mark.parametrize(
    "command, option, value, why",
    [
        ("verify", "--cases", "0", "0 is out of range: give 1 or more"),
        ("verify", "--cases", "-2", "-2 is out of range: give 1 or more"),
        ("verify", "--seed", "-1", "-1 is negative: give 0 or more"),
    ],
)
def test_options_out_of_range_are_one_line(capsys, command, option, value, why):
    # Refused before any work: verify --cases 0 would check nothing and report every variant
    # passed, --seed -1 would reach numpy as an internal error.
    from kvdsl.cli import main

    with pytest.raises(SystemExit) as exit_:
        main([command, "copy_llama32_1b", option, value])
    assert exit_.value.code == 2
    assert f"kvdsl {command}: error: argument {option}: {why}" in capsys.readouterr().err


@pytest.mark.parametrize("args", [["list"], ["list", "--json"], ["show", "copy_llama31_8b"]])
def test_output_cut_short_ends_quietly(args):
    """`kvdsl list | head -5` prints five lines and nothing on stderr; kvdsl exits 141, as a
    Unix tool killed by SIGPIPE does."""
    command = " ".join([sys.executable, "-m", "kvdsl", *args])
    out = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {command} | head -5"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert len(out.stdout.splitlines()) == 5
    assert out.stderr == ""
    assert out.returncode in (0, 141)  # 0: the whole output fitted in the pipe before head left


def test_a_reader_gone_is_exit_141_in_process(monkeypatch, capsys):
    from kvdsl.cli import BROKEN_PIPE, main

    class Gone:
        """A stdout whose reader has gone."""

        def write(self, text: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self) -> None:
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(sys, "stdout", Gone())
    assert main(["list"]) == BROKEN_PIPE == 141
    assert capsys.readouterr().err == ""


def test_help_is_plain_words():
    """`kvdsl --help` and each command's help read as text in a terminal: no reST markup, and
    a sentence saying what the command does."""
    from kvdsl.cli import parser

    commands = parser()._subparsers._group_actions[0].choices
    for args in [[], *([name] for name in commands)]:
        out = kvdsl(*args, "--help")
        assert out.returncode == 0 and out.stderr == "", (args, out.stderr)
        assert "``" not in out.stdout and ":func:" not in out.stdout and ":mod:" not in out.stdout
        description = out.stdout.split("\n\n")[1]
        assert description[0].isupper() and description.rstrip().endswith("."), (args, out.stdout)
    top = kvdsl("--help").stdout
    assert top.split("\n\n")[1].startswith("Build, print, run and verify")
    for variable in (
        "KVDSL_WEBGPU",
        "KVDSL_DAWN_ENABLE",
        "KVDSL_DAWN_DISABLE",
        "KVDSL_LOOP_BOUNDING",
    ):
        assert variable in top
    assert "bench" not in commands  # benchmarks/gpu.py is the benchmark's entry point
