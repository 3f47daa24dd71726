"""Bad input everywhere: configs, legacy variables, buffers and params, device limits, runtime
inputs the host can get wrong, the command line and WGSL text. Each case states its message;
docs/errors.md is the table of them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kvdsl import cli, reference
from kvdsl.harness import cases_for
from kvdsl.frontend import FrontendError, WgslSyntaxError, WgslTypeError, parse
from kvdsl.interp import run as interp_run
from kvdsl.kernels.build import BuildConfig, build
from kvdsl.kernels.config import ConfigError, from_dict
from kvdsl.kernels.copy import CopyConfig, copy
from kvdsl.kernels.merge import MergeConfig, merge
from kvdsl.kernels.merge_share import MergeShareConfig, merge_share
from kvdsl.kernels.quant import AppendQuantConfig, BuildQuantConfig, append_quant, build_quant
from kvdsl.kernels.transpose import TransposeConfig, transpose
from kvdsl.kernels.window_shift import WindowShiftConfig, window_shift
from kvdsl.legacy import config_from_vars
from kvdsl.emit import emit
from kvdsl.reference.judge import compare, poison, values
from kvdsl.runtime import BufferError, ParamsError, run_source
from kvdsl.runtime import run as gpu_run
from kvdsl.runtime.contract import LimitError, check_contract, evaluate
from tests.helpers.paths import ROOT

# ---- configs -----------------------------------------------------------------------------------

CONFIG_ERRORS = [
    ("kv_heads zero", lambda: TransposeConfig(0, 128), r"kv_heads=0: expected a positive integer"),
    ("head_dim negative", lambda: CopyConfig(-4), r"head_dim=-4: expected a positive integer"),
    ("head_dim a bool", lambda: TransposeConfig(8, True), r"head_dim=True: expected a positive"),
    ("head_dim a string", lambda: MergeConfig(8, "128"), r"head_dim='128': expected a positive"),
    ("vec4 head_dim", lambda: TransposeConfig(8, 130, True), r"head_dim=130: .*multiple of 4"),
    ("vec4 not bool", lambda: TransposeConfig(8, 128, 1), r"vec4=1: expected true or false"),
    (
        "words without vec4",
        lambda: TransposeConfig(8, 128, present_type="f16", words=True),
        r"words=True: expected vec4=True \(words carry f16 vectors\)",
    ),
    ("input type", lambda: TransposeConfig(8, 128, input_type="f64"), r"input_type='f64': .*'f32'"),
    ("copy element", lambda: CopyConfig(64, present_type="bf16"), r"present_type='bf16'"),
    (
        "workgroup > 256",
        lambda: CopyConfig(64, workgroup_size=512),
        r"workgroup_size=512: .*<= 256",
    ),
    ("workgroup float", lambda: CopyConfig(64, workgroup_size=64.0), r"workgroup_size=64.0"),
    ("fold zero", lambda: TransposeConfig(8, 128, fold=0), r"fold=0: expected a positive integer"),
    ("fold > 65535", lambda: CopyConfig(64, fold=70000), r"fold=70000: .*<= 65535"),
    ("walk", lambda: CopyConfig(64, walk="diagonal"), r"walk='diagonal': expected one of"),
    ("merge hybrid", lambda: MergeConfig(8, 128, walk="hybrid"), r"walk='hybrid'"),
    (
        "retain hybrid",
        lambda: MergeShareConfig(8, 128, "retain", "hybrid"),
        r"walk='hybrid': expected one of 'cooperative', 'per_row'",
    ),
    ("share region", lambda: MergeShareConfig(8, 128, "middle"), r"region='middle'"),
    (
        "retain rotary",
        lambda: MergeShareConfig(8, 128, "retain", rotary=True),
        r"rotary=True: expected false for region 'retain'",
    ),
    ("rotary odd", lambda: MergeShareConfig(8, 127, rotary=True), r"head_dim=127: .*even"),
    ("rotary not bool", lambda: WindowShiftConfig(4, 256, rotary="yes"), r"rotary='yes'"),
    (
        "window shift rotary",
        lambda: WindowShiftConfig(4, 256, "shift", rotary=True),
        r"rotary=True: expected false for region 'shift'",
    ),
    ("window region", lambda: WindowShiftConfig(4, 256, "sideways"), r"region='sideways'"),
    ("k_norm not bool", lambda: BuildConfig(8, 128, k_norm="yes"), r"k_norm='yes'"),
    (
        "eps zero",
        lambda: BuildConfig(8, 128, eps=0.0),
        r"eps=0.0: expected a number > 0 that is a normal f32",
    ),
    ("eps nan", lambda: BuildConfig(8, 128, eps=float("nan")), r"eps=nan"),
    ("eps below f32", lambda: BuildConfig(8, 128, eps=1e-50), r"eps=1e-50: .*normal f32"),
    ("bits 3", lambda: BuildQuantConfig(8, 128, bits=3), r"bits=3: expected one of 8, 4"),
    ("bits float", lambda: BuildQuantConfig(8, 128, bits=8.0), r"bits=8.0: expected one of 8, 4"),
    ("int4 odd", lambda: BuildQuantConfig(8, 127, bits=4), r"head_dim=127: .*even .*int4"),
    ("qmin range", lambda: AppendQuantConfig(8, 128, 4, qmin=-9), r"qmin=-9: .*\[-8, 7\]"),
    ("qmin >= qmax", lambda: BuildQuantConfig(8, 128, qmin=5, qmax=5), r"qmin=5: .*qmax=5"),
    ("qmax bool", lambda: BuildQuantConfig(8, 128, qmax=True), r"qmax=True: expected an integer"),
    (
        "quant bindings",
        lambda: BuildQuantConfig(8, 128, k_norm=True, rotary=True, bindings="split"),
        r"bindings='split': expected one of 'template', 'packed'$",
    ),
    (
        "rotary position",
        lambda: AppendQuantConfig(8, 128, rotary_position="absolute"),
        r"rotary_position='absolute'",
    ),
    (
        "row too large",
        lambda: TransposeConfig(65536, 1024),
        r"kv_heads\*head_dim=67108864: expected at most 33554432",
    ),
    ("window not bool", lambda: MergeConfig(8, 128, window=1), r"window=1: expected true or false"),
    (
        "window off the flat walk",
        lambda: MergeConfig(8, 128, window=True),
        r"walk='cooperative': expected 'flat' for window=True",
    ),
    (
        "copy window",
        lambda: CopyConfig(128, walk="flat", window=True),
        r"window=True: expected false for copy \(position-independent",
    ),
    (
        "unknown field",
        lambda: from_dict(CopyConfig, {"head_dim": 8, "heads": 2}),
        r"heads=2: expected a field of the copy config",
    ),
    (
        "missing field",
        lambda: from_dict(MergeConfig, {"kv_heads": 2}),
        r"head_dim=None: expected a value \(required by the merge config\)",
    ),
]


@pytest.mark.parametrize(
    "make,message", [c[1:] for c in CONFIG_ERRORS], ids=[c[0] for c in CONFIG_ERRORS]
)
def test_config_errors(make, message) -> None:
    with pytest.raises(ConfigError, match=message):
        make()


TRANSPOSE_VARS = {
    "mode": "transpose",
    "kvNumHeads": 8,
    "headDim": 128,
    "copyWorkgroupSize": 64,
    "DISPATCH_FOLD_WIDTH": 65535,
}
LEGACY_ERRORS = [
    ("unknown variable", {"bogus": 1}, r"bogus=1: expected a variable the template reads"),
    ("unknown mode", {"mode": "paint"}, r"mode='paint': expected one of append_quant"),
    ("contradiction", {"kvHidden": 100}, r"kvHidden=100: expected 1024 \(kvNumHeads \* headDim\)"),
    ("missing", {"kvNumHeads": None}, r"kvNumHeads=None: expected a value"),
    ("wrong type", {"headDim": "128"}, r"headDim='128': expected an integer"),
    ("bad value", {"copyWorkgroupSize": 1024}, r"copyWorkgroupSize=1024: .*<= 256"),
]


@pytest.mark.parametrize(
    "change,message", [c[1:] for c in LEGACY_ERRORS], ids=[c[0] for c in LEGACY_ERRORS]
)
def test_legacy_variable_errors(change, message) -> None:
    data = {k: v for k, v in (TRANSPOSE_VARS | change).items() if v is not None}
    with pytest.raises(ConfigError, match=message):
        config_from_vars(data)


# ---- buffers, params and device limits ---------------------------------------------------------

KERNELS = {
    "transpose": (TransposeConfig(2, 16, vec4=True), transpose),
    "copy": (CopyConfig(16), copy),
    "merge": (MergeConfig(2, 16), merge),
    "merge_share_retain": (MergeShareConfig(2, 16, "retain"), merge_share),
    "merge_share_append": (MergeShareConfig(2, 16, "append", rotary=True), merge_share),
    "window_shift": (WindowShiftConfig(2, 16), window_shift),
    "window_shift_append": (WindowShiftConfig(2, 16, "append", rotary=True), window_shift),
    "build": (BuildConfig(2, 16, k_norm=True, rotary=True), build),
    "build_quant": (BuildQuantConfig(2, 16, bits=4, rotary=True), build_quant),
    "append_quant": (AppendQuantConfig(2, 16, k_norm=True), append_quant),
}
SHRINK = [(m, b.name) for m, (cfg, fn) in KERNELS.items() for b in fn(cfg).bindings]


def _case(mode: str, i: int = 1):
    cfg, fn = KERNELS[mode]
    return fn(cfg), cases_for(cfg, i + 1, seed=7)[i]


@pytest.mark.parametrize("mode,name", SHRINK, ids=[f"{m}-{b}" for m, b in SHRINK])
def test_buffer_one_element_short(gpu, mode: str, name: str) -> None:
    """Every binding of every mode: one element fewer than the contract says is an error naming
    the binding and both sizes, before any dispatch; the exact size passes the check."""
    kernel, case = _case(mode)
    need = evaluate(dict(kernel.extents)[name], kernel, case.params, case.buffers)
    width = getattr(kernel.binding(name).elem, "n", 1)
    exact = dict(case.buffers)
    exact[name] = case.buffers[name][: need * width]
    check_contract(kernel, exact, case.params)
    short = dict(case.buffers)
    short[name] = case.buffers[name][: (need - 1) * width]
    message = (
        rf"binding '{name}' \(array<.*>\) holds {need - 1} elements, but kernel .* touches {need}"
    )
    with pytest.raises(BufferError, match=message):
        gpu_run(kernel, short, case.params)


def test_contract_sized_inputs_suffice() -> None:
    """Inputs cut to exactly their extents run on the interpreter with no out-of-bounds read."""
    for mode in KERNELS:
        for i in range(3):
            kernel, case = _case(mode, i)
            bufs = dict(case.buffers)
            for b in kernel.bindings:
                if b.access == "read":
                    need = evaluate(dict(kernel.extents)[b.name], kernel, case.params, bufs)
                    bufs[b.name] = bufs[b.name][: need * b.host_values]
            got = interp_run(kernel, bufs, case.params)
            for name, want in case.expected.items():
                tol = case.tolerance.get(name, 0.0)
                if name not in case.quantized:
                    assert compare(got[name], want, tol, case.written.get(name))[1] == "", mode


def test_params_errors(gpu) -> None:
    kernel, case = _case("merge")
    bad = [
        (dict(case.params, seq=case.params["seq"] + 1), r"requires seq <= pastSeq \+ keySeq"),
        (dict(case.params, seq=0, count=0), r"requires seq >= 1; got seq=0"),
        ({k: v for k, v in case.params.items() if k != "keySeq"}, r"'keySeq' is missing"),
        (dict(case.params, count=-1), r"'count' is u32: -1 is outside \[0, 4294967295\]"),
        (dict(case.params, count=2.5), r"'count' is u32: got 2.5, expected an integer"),
        (dict(case.params, batch=1), r"params has no field 'batch'"),
    ]
    for params, message in bad:
        with pytest.raises(ParamsError, match=message):
            gpu_run(kernel, dict(case.buffers), params)


def test_buffer_kind_errors(gpu) -> None:
    kernel, case = _case("transpose")
    bufs = dict(case.buffers)
    with pytest.raises(
        BufferError, match=r"binding 'key' \(array<vec4<f32>>, read\) has no buffer"
    ):
        gpu_run(kernel, {k: v for k, v in bufs.items() if k != "key"}, case.params)
    with pytest.raises(BufferError, match=r"buffer 'keys' has no binding"):
        gpu_run(kernel, bufs | {"keys": bufs["key"]}, case.params)
    with pytest.raises(
        BufferError,
        match=r"got an array of 64-bit floats \(float64\), expected 32-bit floats \(float32\)",
    ):
        gpu_run(kernel, bufs | {"key": bufs["key"].astype(np.float64)}, case.params)
    with pytest.raises(BufferError, match=r"got 63 float32 values, expected a multiple of 4"):
        gpu_run(kernel, bufs | {"key": bufs["key"][:63]}, case.params)


def test_too_many_storage_buffers(gpu) -> None:
    """WGSL text run with no limits stated gets WebGPU's default 8 storage buffers: a module
    binding 9 is refused before dispatch, naming the limit."""
    cfg = BuildQuantConfig(2, 16, k_norm=True, rotary=True, bindings="template")
    kernel = build_quant(cfg)
    case = cases_for(cfg, 1)[0]
    with pytest.raises(LimitError, match=r"binds 9 storage buffers; the device allows 8"):
        run_source(
            emit(kernel), kernel.bindings, kernel.params, case.buffers, case.params, (1, 1, 1)
        )


def test_limit_past_the_adapter(gpu) -> None:
    """A kernel needing more than the adapter allows is refused, naming the limit, the need
    and the adapter's value."""
    from kvdsl.runtime import device

    most = device.adapter().limits["max-storage-buffers-per-shader-stage"]
    need = {"maxStorageBuffersPerShaderStage": most + 1}
    with pytest.raises(
        LimitError,
        match=rf"^the kernel needs maxStorageBuffersPerShaderStage = {most + 1}; adapter '.*' "
        rf"allows {most}$",
    ):
        device.device(limits=need)


def test_binding_larger_than_device_allows(gpu) -> None:
    kernel = copy(CopyConfig(4))
    big = np.zeros(2**25 + 4, np.float32)  # 128 MiB + 16 bytes
    bufs = {"src_k": big, "src_v": big, "present_key": big[:4], "present_value": big[:4]}
    with pytest.raises(LimitError, match=r"binding 'src_k' is 134217744 bytes; the device binds"):
        gpu_run(kernel, bufs, {"count": 1})


def test_workgroups_past_the_fold(gpu) -> None:
    """A fold of 2 holds at most 2 * 65535 workgroups; more is an error naming the fold."""
    kernel = copy(CopyConfig(1, workgroup_size=1, fold=2))
    rows = 2 * 65535 + 1
    bufs = {
        k: np.ones(rows, np.float32) for k in ("src_k", "src_v", "present_key", "present_value")
    }
    with pytest.raises(
        LimitError, match=r"needs 131071 workgroups .* folded at 2 that is 65536 in y"
    ):
        gpu_run(kernel, bufs, {"count": rows})


# ---- runtime inputs the host can get wrong -----------------------------------------------------


def _window_run(cfg, fn, seqlens, cap: int, key_seq: int):
    """Interpreter and reference for a seqlens_k mode at the given capacity and new tokens."""
    rng = np.random.default_rng(3)
    seqlens = np.array(seqlens, np.int32)
    batch, h, d = len(seqlens), cfg.kv_heads, cfg.head_dim
    keep = min(key_seq, cap)
    new_k, new_v = (values(rng, (batch, key_seq, h * d), np.float32) for _ in range(2))
    shape = (batch, h, cap, d)
    past_k, past_v = (values(rng, shape, np.float32) for _ in range(2))
    if cfg.mode == "window_shift":
        bufs = {"past_k": past_k, "past_v": past_v, "new_k": new_k, "new_v": new_v}
        want = reference.window_shift(past_k, past_v, new_k, new_v, seqlens, "all")
        params = {"count": batch * h * cap, "seq": cap, "keySeq": key_seq}
    else:
        bufs = {"new_k": new_k, "new_v": new_v}
        want = reference.merge_share_append(
            new_k[:, key_seq - keep :], new_v[:, key_seq - keep :], seqlens, cap, h
        )
        params = {"count": batch * h * key_seq, "seq": cap, "keySeq": key_seq}
    kernel = fn(cfg)
    bufs = {k: v.reshape(-1) for k, v in bufs.items()} | {"seqlens_k": seqlens}
    bufs |= {k: poison(past_k.size, np.float32) for k in ("present_key", "present_value")}
    check_contract(kernel, bufs, params)
    got = interp_run(kernel, bufs, params)  # raises OutOfBounds on any stray access
    for name, w in (("present_key", want.key), ("present_value", want.value)):
        assert compare(got[name], w, 0.0, want.mask)[1] == ""
    return got


RUNTIME_INPUTS = [
    ("seqlens_k -1 (empty)", [-1, 5], 8, 3),
    ("seqlens_k -2", [-2, 5], 8, 3),
    ("seqlens_k i32 min", [-(2**31), 0], 8, 3),
    ("seqlens_k beyond capacity", [20, 8], 8, 3),
    ("seqlens_k i32 max", [2**31 - 1, 7], 8, 3),
    ("seqlens_k below new tokens (right-padded)", [0, 1], 8, 5),
    ("keySeq beyond capacity", [3, 40], 6, 9),
    ("keySeq beyond capacity, empty", [-1, -7], 4, 11),
]


@pytest.mark.parametrize(
    "seqlens,cap,key_seq", [c[1:] for c in RUNTIME_INPUTS], ids=[c[0] for c in RUNTIME_INPUTS]
)
@pytest.mark.parametrize("mode", ["merge_share", "window_shift"])
def test_runtime_inputs_clamped(mode, seqlens, cap: int, key_seq: int) -> None:
    """Clamped by the kernel: no out-of-bounds access, and the reference's documented result
    (negative = empty; window clamped to the capacity; only the newest `cap` new tokens kept)."""
    if mode == "merge_share":
        _window_run(MergeShareConfig(2, 8, "append"), merge_share, seqlens, cap, key_seq)
    else:
        _window_run(WindowShiftConfig(2, 8, "all"), window_shift, seqlens, cap, key_seq)


def test_past_seq_beyond_present_capacity_truncates(gpu) -> None:
    """merge: a pastSeq larger than the present (seq) keeps the first seq past rows of each head
    (the present is a truncated concatenation, as the reference states it); no out-of-bounds
    access on the interpreter, and the GPU agrees. A present longer than past + new is refused."""
    kernel, case = _case("merge")
    params = dict(case.params, pastSeq=case.params["seq"] + 4, keySeq=1)
    seq = params["seq"]
    heads, head_dim = kernel.const("KV_HEADS"), kernel.const("HEAD_DIM")
    h, d = heads.value.value, head_dim.value.value
    batches = params["count"] // (h * seq)
    rng = np.random.default_rng(0)
    past_k, past_v = (values(rng, (batches, h, params["pastSeq"], d), np.float32) for _ in range(2))
    new_k, new_v = (values(rng, (batches, 1, h * d), np.float32) for _ in range(2))
    bufs = dict(case.buffers) | {
        "past_k": past_k.ravel(),
        "past_v": past_v.ravel(),
        "new_k": new_k.ravel(),
        "new_v": new_v.ravel(),
    }
    want_k, want_v = reference.merge(past_k, past_v, new_k, new_v, seq)
    for out in (interp_run(kernel, bufs, params), gpu_run(kernel, bufs, params)):
        assert np.array_equal(out["present_key"], want_k.ravel())
        assert np.array_equal(out["present_value"], want_v.ravel())
    longer = dict(params, pastSeq=1, keySeq=1)
    with pytest.raises(ParamsError, match=r"requires seq <= pastSeq \+ keySeq .*pastSeq=1"):
        gpu_run(kernel, bufs, longer)


def test_rotary_positions_past_the_tables(gpu) -> None:
    """A seqlens_k far past the cos/sin tables (window_shift rotary) or a pastSeq past them
    (build) is a host error naming cos_cache and the positions' element count."""
    kernel, case = _case("window_shift_append")
    seqlens = case.buffers["seqlens_k"].copy()
    seqlens[0] = 2**31 - 1
    half_v4 = 8 // 4  # the drop-in reads cos/sin as vec4
    with pytest.raises(BufferError, match=rf"'cos_cache'.* touches {2**31 * half_v4} "):
        gpu_run(kernel, dict(case.buffers, seqlens_k=seqlens), case.params)
    kernel, case = _case("build")
    params = dict(case.params, pastSeq=10**6)
    with pytest.raises(BufferError, match=r"'cos_cache'.* \(\(pastSeq \+ seq\) \* 8u / 4u\)"):
        gpu_run(kernel, dict(case.buffers), params)


def test_short_seqlens_k(gpu) -> None:
    kernel, case = _case("merge_share_retain")
    short = case.buffers["seqlens_k"][:-1]
    with pytest.raises(BufferError, match=r"binding 'seqlens_k' \(array<i32>\) holds"):
        gpu_run(kernel, dict(case.buffers, seqlens_k=short), case.params)


# ---- the command line --------------------------------------------------------------------------


def _npz(path: Path, **arrays) -> str:
    np.savez(path, **arrays)
    return str(path)


def cli_errors(tmp: Path) -> list[tuple[str, list[str], str]]:
    """(what, argv, message) of bad command lines."""
    n = 2 * 5 * 2 * 64
    good = {"key": np.ones(n, np.float32), "value": np.ones(n, np.float32)}
    good |= {"present_key": poison(n, np.float32), "present_value": poison(n, np.float32)}
    inputs = _npz(tmp / "in.npz", **good)
    short = _npz(tmp / "short.npz", **(good | {"key": good["key"][:-1]}))
    wrong = _npz(tmp / "f64.npz", **(good | {"key": good["key"].astype(np.float64)}))
    (tmp / "not.npz").write_text("hello")
    params = '{"batchSize": 2, "kvSeq": 5}'
    run = ["run", "transpose_qwen25_05b", "--inputs", inputs, "--params", params]
    return [
        ("unknown variant", ["show", "transpose_nope"], "transpose_nope"),
        ("verify unknown", ["verify", "nope_variant"], "nope_variant"),
        ("params not JSON", run[:4] + ["--params", "{batch"], "--params: not valid JSON"),
        ("params not object", run[:4] + ["--params", "[1, 2]"], "expected a JSON object"),
        ("no inputs file", ["run", "copy_llama31_8b", "--inputs", "/no/such.npz"], "no such file"),
        ("inputs not npz", run[:3] + [str(tmp / "not.npz")] + run[4:], "is not an .npz archive"),
        ("workgroups", run + ["--workgroups", "1,2"], "expected three non-negative integers"),
        ("short buffer", run[:3] + [short] + run[4:], "binding 'key' (array<f32>) holds 1279"),
        ("dtype", run[:3] + [wrong] + run[4:], "got an array of 64-bit floats (float64), expected 32-bit floats (float32)"),
        ("unknown param", run[:4] + ["--params", '{"batchSize": 2, "kvSeq": 5, "x": 1}'], "no field 'x'"),
        ("negative param", run[:4] + ["--params", '{"batchSize": -2, "kvSeq": 5}'], "outside [0"),
        ("missing param", run[:4] + ["--params", '{"batchSize": 2}'], "'kvSeq' is missing"),
    ]  # fmt: skip


def test_cli_bad_input_is_one_line_exit_2(tmp_path, capsys, gpu) -> None:
    for what, argv, message in cli_errors(tmp_path):
        code = cli.main(argv)
        out = capsys.readouterr()
        assert code == 2, (what, out.err)
        assert out.err.count("\n") == 1 and message in out.err, (what, out.err)
        assert "Traceback" not in out.err + out.out


def test_cli_limit_error_is_exit_2(tmp_path, capsys, gpu, monkeypatch) -> None:
    """A device limit from `kvdsl run` (a fold too small for the rows) is one line, exit 2."""
    from kvdsl import catalog

    monkeypatch.setitem(catalog.VARIANTS, "copy_fold2", CopyConfig(1, workgroup_size=1, fold=2))
    rows = 2 * 65535 + 1
    arrays = {
        k: np.ones(rows, np.float32) for k in ("src_k", "src_v", "present_key", "present_value")
    }
    path = _npz(tmp_path / "in.npz", **arrays)
    code = cli.main(["run", "copy_fold2", "--inputs", path, "--params", f'{{"count": {rows}}}'])
    err = capsys.readouterr().err
    assert code == 2 and "folded at 2" in err and err.count("\n") == 1


def test_cli_subprocess_prints_no_traceback(tmp_path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "kvdsl", "run", "merge_llama31_8b", "--inputs", "/no/such.npz"],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip() == "kvdsl run: --inputs: no such file '/no/such.npz'"


# ---- WGSL text ---------------------------------------------------------------------------------

KERNEL = """@group(0) @binding(0) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    out[gid.x] = 1.0f;
}
"""
WGSL_ERRORS = [
    ("missing semicolon", KERNEL.replace("1.0f;", "1.0f"), WgslSyntaxError, r"<wgsl>:6:1:"),
    ("stray token", KERNEL.replace("out[gid.x]", "out[gid.x]]"), WgslSyntaxError, r"<wgsl>:5:15:"),
    ("unclosed brace", KERNEL[:-2], WgslSyntaxError, r"<wgsl>:\d+:\d+:"),
    ("undeclared name", KERNEL.replace("out[gid.x]", "outs[gid.x]"), WgslTypeError, r"<wgsl>:5:.*outs"),
    ("type mismatch", KERNEL.replace("1.0f", "1u"), WgslTypeError, r"<wgsl>:5:"),
    ("empty text", "", FrontendError, r"<wgsl>:"),
    ("comparison read as a template list",
     KERNEL.replace("1.0f;", "select(0.0f, 1.0f, select(gid.x < 2u, false, gid.y > 3u));"),
     WgslSyntaxError, r"<wgsl>:5:50: WGSL reads 'x <' as the start of a template list"),
]  # fmt: skip


@pytest.mark.parametrize(
    "text,kind,message", [c[1:] for c in WGSL_ERRORS], ids=[c[0] for c in WGSL_ERRORS]
)
def test_wgsl_errors_are_located(text: str, kind: type, message: str) -> None:
    with pytest.raises(kind, match=message):
        parse(text)
