"""kvdsl.runtime: params packing, buffer checks, GPU runs of transpose, naga and Tint errors."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from kvdsl.emit import emit
from kvdsl.ir import Binding, Struct, f16, f32, i32, u32, vec, workgroups
from kvdsl.kernels.transpose import TransposeConfig, transpose
from kvdsl.runtime import (
    BufferError,
    CompileError,
    DeviceError,
    ParamsError,
    WebGPU,
    compile_wgsl,
    pack_params,
    params_layout,
    run,
    run_source,
    tint_check,
    time_kernel,
    use_webgpu,
)
from kvdsl.runtime.layout import from_storage, to_storage

DTYPES = {"f32": np.float32, "f16": np.float16}
UINT = {np.dtype(np.float32): np.uint32, np.dtype(np.float16): np.uint16}

# ---- params packing -----------------------------------------------------------------------------

MIXED = Struct(
    "Params",
    (
        ("a", u32),
        ("b", f16),
        ("c", f32),
        ("d", vec(4, f32)),
        ("e", f16),
        ("g", vec(2, f32)),
        ("h", vec(3, f32)),
        ("i", i32),
    ),
)
MIXED_VALUES = {
    "a": 0xDEADBEEF,
    "b": 1.5,
    "c": -2.25,
    "d": (1.0, 2.0, 3.0, 4.0),
    "e": -0.5,
    "g": [5.0, 6.0],
    "h": np.array([7.0, 8.0, 9.0]),
    "i": -7,
}


def test_params_layout_offsets():
    offsets, size = params_layout(MIXED)
    # vec4 aligns to 16, vec2 to 8, f16 to 2; the i32 after a vec3 fills its padding word.
    assert offsets == {"a": 0, "b": 4, "c": 8, "d": 16, "e": 32, "g": 40, "h": 48, "i": 60}
    assert size == 64


def test_pack_params_bytes():
    expected = bytearray(64)
    struct.pack_into("<I", expected, 0, 0xDEADBEEF)
    struct.pack_into("<e", expected, 4, 1.5)
    struct.pack_into("<f", expected, 8, -2.25)
    struct.pack_into("<4f", expected, 16, 1.0, 2.0, 3.0, 4.0)
    struct.pack_into("<e", expected, 32, -0.5)
    struct.pack_into("<2f", expected, 40, 5.0, 6.0)
    struct.pack_into("<3f", expected, 48, 7.0, 8.0, 9.0)
    struct.pack_into("<i", expected, 60, -7)
    assert pack_params(MIXED, MIXED_VALUES) == bytes(expected)


def test_pack_params_rounds_size_to_16():
    p = Struct("Params", (("batchSize", u32), ("kvSeq", u32)))
    assert pack_params(p, {"batchSize": 3, "kvSeq": 70000}) == struct.pack("<II8x", 3, 70000)


BSKV = Struct("Params", (("batchSize", u32), ("kvSeq", u32)))


@pytest.mark.parametrize(
    "values, words",
    [
        ({"batchSize": 1}, ["'kvSeq' is missing", "batchSize: u32, kvSeq: u32"]),
        ({"batchSize": 1, "kvSeq": 2, "kvseq": 3}, ["no field 'kvseq'", "batchSize: u32"]),
        ({"batchSize": -1, "kvSeq": 2}, ["'batchSize'", "-1", "outside"]),
        ({"batchSize": 2**32, "kvSeq": 2}, ["'batchSize'", "4294967296", "outside"]),
        ({"batchSize": 1.5, "kvSeq": 2}, ["'batchSize'", "1.5", "integer"]),
    ],
)
def test_pack_params_errors_name_the_field(values, words):
    with pytest.raises(ParamsError) as e:
        pack_params(BSKV, values)
    for w in words:
        assert w in str(e.value)


def test_storage_bytes_pad_and_round_trip():
    odd = np.arange(1, 8, dtype=np.float16).reshape(7, 1)
    data = to_storage(f16, odd)
    assert len(data) == 16 and data[14:] == b"\0\0"
    assert np.array_equal(from_storage(f16, data, odd), odd)
    assert to_storage(f32, np.zeros(0, np.float32)) == bytes(4)
    v3 = np.arange(1, 7, dtype=np.float32)
    data = to_storage(vec(3, f32), v3)  # array<vec3<f32>> has a 16-byte stride
    assert np.array_equal(np.frombuffer(data, np.float32), [1, 2, 3, 0, 4, 5, 6, 0])
    assert np.array_equal(from_storage(vec(3, f32), data, v3), v3)


# ---- transpose on the GPU -----------------------------------------------------------------------


def nonzero(rng: np.random.Generator, shape: tuple[int, ...], dtype) -> np.ndarray:
    """Random values in ±[0.5, 4): never zero, never subnormal, exact in f16."""
    sign = rng.choice([-1.0, 1.0], size=shape)
    return (sign * rng.uniform(0.5, 4.0, size=shape)).astype(dtype)


def transpose_case(cfg: TransposeConfig, batch: int, seq: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    h, d = cfg.kv_heads, cfg.head_dim
    src_t, dst_t = DTYPES[cfg.input_type], DTYPES[cfg.present_type]
    new = {n: nonzero(rng, (batch, seq, h * d), src_t) for n in ("key", "value")}
    poison = {f"present_{n}": np.full((batch, h, seq, d), np.nan, dst_t) for n in ("key", "value")}
    expected = {
        f"present_{n}": a.reshape(batch, seq, h, d).transpose(0, 2, 1, 3).astype(dst_t)
        for n, a in new.items()
    }
    return {**new, **poison}, {"batchSize": batch, "kvSeq": seq}, expected


def assert_bits_equal(got: dict, expected: dict) -> None:
    assert got.keys() == expected.keys()
    for name, want in expected.items():
        assert got[name].dtype == want.dtype and got[name].shape == want.shape, name
        bits = UINT[want.dtype]
        assert np.array_equal(got[name].view(bits), want.view(bits)), name


TRANSPOSES = [
    (TransposeConfig(4, 16), 2, 9),
    (TransposeConfig(4, 16, vec4=True), 2, 9),
    (TransposeConfig(8, 32, vec4=False, present_type="f16"), 1, 7),
    (TransposeConfig(8, 32, vec4=True, present_type="f16"), 3, 5),
    (TransposeConfig(2, 8, vec4=True, input_type="f16", present_type="f16"), 2, 3),
    (TransposeConfig(2, 8, input_type="f16", present_type="f32", workgroup_size=32), 1, 5),
    # 15 f16 elements: 30 bytes, padded to 32 on the GPU and cut back on read-back.
    (TransposeConfig(1, 3, input_type="f16", present_type="f16"), 1, 5),
]


@pytest.mark.parametrize("cfg, batch, seq", TRANSPOSES, ids=lambda v: repr(v))
def test_transpose_matches_numpy(gpu, cfg, batch, seq):
    buffers, params, expected = transpose_case(cfg, batch, seq)
    assert_bits_equal(run(transpose(cfg), buffers, params), expected)


@pytest.mark.parametrize("vec4", [False, True])
def test_transpose_folded_dispatch(gpu, vec4):
    cfg = TransposeConfig(4, 16, vec4=vec4, present_type="f16", fold=4)
    kernel = transpose(cfg)
    buffers, params, expected = transpose_case(cfg, 3, 37, seed=1)
    wg = workgroups(kernel, params)
    assert wg[0] == 4 and wg[1] > 1 and wg[0] * wg[1] * 64 * (4 if vec4 else 1) > 3 * 4 * 37 * 16
    assert_bits_equal(run(kernel, buffers, params), expected)


def test_run_source_takes_raw_wgsl(gpu):
    cfg = TransposeConfig(2, 8, vec4=True)
    kernel = transpose(cfg)
    buffers, params, expected = transpose_case(cfg, 2, 4, seed=2)
    got = run_source(
        emit(kernel), kernel.bindings, kernel.params, buffers, params, workgroups(kernel, params)
    )
    assert_bits_equal(got, expected)


def test_time_kernel(gpu):
    cfg = TransposeConfig(4, 16, vec4=True)
    buffers, params, _ = transpose_case(cfg, 2, 32)
    times = time_kernel(transpose(cfg), buffers, params, repeats=4, warmup=1)
    assert len(times) == 4
    assert all(0 < t < 1 for t in times)


def test_time_kernel_reuse_never_aliases_bindings(gpu):
    # One numpy array given to both inputs and one to both outputs (a benchmark's shared random
    # pool): reuse must still make one device buffer per binding, or K and V reads would hit one
    # address and the timing would count half the traffic.
    cfg = TransposeConfig(4, 16, vec4=True)
    buffers, params, _ = transpose_case(cfg, 2, 32)
    src, dst = buffers["key"], buffers["present_key"]
    shared = {"key": src, "value": src, "present_key": dst, "present_value": dst}
    reuse: dict = {}
    time_kernel(transpose(cfg), shared, params, repeats=2, warmup=1, reuse=reuse)
    assert len(reuse) == 4 and len({id(b) for b in reuse.values()}) == 4
    time_kernel(transpose(cfg), shared, params, repeats=2, warmup=1, reuse=reuse)
    assert len(reuse) == 4  # the second timing uploads nothing new


# ---- errors -------------------------------------------------------------------------------------


def test_compile_error_names_line(gpu):
    wgsl = emit(transpose(TransposeConfig(4, 16)))
    lines = wgsl.splitlines()
    n = next(i for i, line in enumerate(lines) if line.strip().startswith("let src ="))
    lines[n] = lines[n].replace("let src =", "let src: f32 =")
    broken = "\n".join(lines) + "\n"
    with pytest.raises(CompileError) as e:
        compile_wgsl(broken)
    assert e.value.line == n + 1
    assert f"line {n + 1}: {lines[n]}" in str(e.value)
    assert "f32" in e.value.compiler_message


def test_compile_wgsl_accepts_transposes(gpu):
    for cfg, _, _ in TRANSPOSES:
        compile_wgsl(emit(transpose(cfg)))


def test_binding_access_mismatch_is_compile_error(gpu):
    kernel = transpose(TransposeConfig(2, 8))
    wrong = tuple(Binding(b.name, b.elem, "read") for b in kernel.bindings)
    buffers, params, _ = transpose_case(TransposeConfig(2, 8), 1, 2)
    with pytest.raises(CompileError, match="binding"):
        run_source(emit(kernel), wrong, kernel.params, buffers, params, (1, 1, 1))


@pytest.mark.parametrize(
    "change, words",
    [
        (lambda b: b.pop("value"), ["'value'", "array<vec4<f32>>", "no buffer"]),
        (lambda b: b.update(extra=np.ones(4, np.float32)), ["'extra'", "no binding"]),
        (
            lambda b: b.update(key=b["key"].astype(np.float64)),
            ["'key'", "array<vec4<f32>>", "float64", "float32"],
        ),
        (
            lambda b: b.update(present_key=np.ones(6, np.float32)),
            ["'present_key'", "6", "multiple of 4"],
        ),
        (lambda b: b.update(key=[1.0] * 8), ["'key'", "list", "float32"]),
    ],
)
def test_buffer_errors(gpu, change, words):
    cfg = TransposeConfig(2, 8, vec4=True)
    buffers, params, _ = transpose_case(cfg, 1, 2)
    change(buffers)
    with pytest.raises(BufferError) as e:
        run(transpose(cfg), buffers, params)
    for w in words:
        assert w in str(e.value)


def test_workgroups_over_limit(gpu):
    cfg = TransposeConfig(2, 8)
    buffers, params, _ = transpose_case(cfg, 1, 2)
    with pytest.raises(DeviceError, match="65535"):
        run(transpose(cfg), buffers, params, workgroups=(65536, 1, 1))


def test_params_errors_through_run(gpu):
    cfg = TransposeConfig(2, 8)
    buffers, params, _ = transpose_case(cfg, 1, 2)
    with pytest.raises(ParamsError, match="'kvseq'"):
        run(transpose(cfg), buffers, {**params, "kvseq": 2}, workgroups=(1, 1, 1))


# ---- Tint ---------------------------------------------------------------------------------------


def test_tint_check():
    sources = {f"transpose{i}": emit(transpose(cfg)) for i, (cfg, _, _) in enumerate(TRANSPOSES)}
    good = sources["transpose0"]
    sources["broken"] = good.replace("let src =", "let src: f32 =")
    results = tint_check(sources)
    assert results.keys() == sources.keys()
    assert {n: r for n, r in results.items() if n != "broken"} == {
        n: None for n in sources if n != "broken"
    }
    assert results["broken"] is not None
    assert "let src: f32 =" in results["broken"]
    assert "error" in results["broken"]


def test_poison_catches_unwritten_elements(gpu):
    cfg = TransposeConfig(4, 16)
    buffers, params, expected = transpose_case(cfg, 2, 9)
    got = run(transpose(cfg), buffers, params, workgroups=(1, 1, 1))  # 64 of 1152 elements
    assert np.isnan(got["present_key"]).sum() == got["present_key"].size - 64
    with pytest.raises(AssertionError):
        assert_bits_equal(got, expected)


def test_f16_kernel_on_adapter_without_f16(without_feature):
    without_feature("shader-f16")
    cfg = TransposeConfig(2, 8, present_type="f16")
    buffers, params, _ = transpose_case(cfg, 1, 2)
    with pytest.raises(DeviceError, match="shader-f16"):
        run(transpose(cfg), buffers, params)


def test_f16_refused_under_dawn_on_nvidia_names_the_toggle(without_feature, monkeypatch):
    # Dawn leaves shader-f16 off on NVIDIA's Vulkan driver unless `vulkan_enable_f16_on_nvidia`
    # is on: the refusal says how to get it there, and only there.
    from kvdsl.runtime import device

    without_feature("shader-f16")
    cfg = TransposeConfig(2, 8, present_type="f16")
    buffers, params, _ = transpose_case(cfg, 1, 2)
    native, dawn = WebGPU("wgpu-native"), WebGPU("dawn")
    monkeypatch.setattr(device, "_webgpu", native)  # (the suite may run on Dawn)
    with pytest.raises(DeviceError, match="shader-f16' feature$"):  # wgpu-native: no hint
        run(transpose(cfg), buffers, params)
    monkeypatch.setattr(device, "_webgpu", dawn)
    nvidia = dict(device.adapter().info, vendor="nvidia", vendor_id=0x10DE, backend_type="Vulkan")
    monkeypatch.setattr(device.adapter(), "info", nvidia, raising=False)
    with pytest.raises(DeviceError, match="KVDSL_DAWN_ENABLE=vulkan_enable_f16_on_nvidia"):
        run(transpose(cfg), buffers, params)
    amd = dict(nvidia, vendor="amd", vendor_id=0x1002, device="Radeon")
    monkeypatch.setattr(device.adapter(), "info", amd)
    with pytest.raises(DeviceError, match="shader-f16' feature$"):
        run(transpose(cfg), buffers, params)


def test_loop_bounding_off_writes_what_bounded_loops_write(gpu, monkeypatch):
    """WebGPU(loop_bounding=False) (KVDSL_LOOP_BOUNDING=0) makes modules without naga's loop
    counters: a kernel whose step loop passes barriers writes the same bytes either way, through
    two pipelines (the setting is part of the cache's key)."""
    from kvdsl import catalog
    from kvdsl.harness import cases_for
    from kvdsl.runtime import device, run

    monkeypatch.setattr(device, "_webgpu", device.current_webgpu())  # restored after the test
    name = "build_quant_int8_knorm_qwen3_06b"
    cfg = catalog.config(name)
    kernel = catalog.build_config(cfg, name)
    case = next(iter(cases_for(cfg, 1, seed=3)))
    outs = {}
    for bounded in (True, False):
        use_webgpu(WebGPU(loop_bounding=bounded))  # may change after loading
        outs[bounded] = run(kernel, dict(case.buffers), case.params)
        assert any(key[-1] is bounded and key[0] == emit(kernel) for key in device._pipelines)
        assert device.adapter_info()["loop_bounding"] is bounded  # what gpu.py's device.json keeps
    # No runtime checks at all (device.trusted_module with flags 0): the same.
    use_webgpu(WebGPU())
    monkeypatch.setattr(device, "_pipelines", {})  # nothing to serve the form below from
    made = []

    def unchecked(dev, label, code):
        made.append(label)
        return device.trusted_module(dev, label, code, 0)

    monkeypatch.setattr(device, "shader_module", unchecked)
    outs[None] = run(kernel, dict(case.buffers), case.params)
    assert made, "the unchecked form was served from another form's pipeline"
    assert outs[True].keys() == outs[False].keys() == outs[None].keys() and outs[True]
    for out in outs[True]:
        for other in (False, None):
            assert np.array_equal(outs[True][out].view(np.uint8), outs[other][out].view(np.uint8))
        assert np.count_nonzero(outs[True][out]) > 0


def test_loop_bounding_setting():
    from kvdsl.runtime import DeviceError, WebGPU

    for text, want in (("", True), ("1", True), ("0", False), (" 0 ", False)):
        assert WebGPU.from_environment({"KVDSL_LOOP_BOUNDING": text}).loop_bounding is want
    with pytest.raises(DeviceError, match="KVDSL_LOOP_BOUNDING='no': expected 0 or 1"):
        WebGPU.from_environment({"KVDSL_LOOP_BOUNDING": "no"})
    # Only naga bounds loops: under Dawn (Tint) the setting is an error, not a silent no-op.
    with pytest.raises(DeviceError, match="KVDSL_LOOP_BOUNDING=0 needs wgpu-native"):
        WebGPU.from_environment({"KVDSL_WEBGPU": "dawn", "KVDSL_LOOP_BOUNDING": "0"})
    with pytest.raises(DeviceError, match="loop_bounding=False needs wgpu-native"):
        WebGPU("dawn", loop_bounding=False)


def test_an_opengl_adapter_is_refused_under_wgpu_native(monkeypatch):
    # A machine with Mesa's GL and no Vulkan driver offers llvmpipe through OpenGL alone, where
    # naga's GLSL gives 7u / 0u as 0u (WGSL: 7u) and a float past i32 as another value
    # (23 conformance cases fail there). kvdsl takes another adapter where
    # there is one and otherwise refuses, naming the fix.
    from kvdsl.runtime import DeviceError, device

    class Fake:
        def __init__(self, backend: str) -> None:
            self.info = {"backend_type": backend, "device": "llvmpipe (LLVM 15.0.6, 256 bits)"}

    gl, vk = Fake("OpenGL"), Fake("Vulkan")
    gpu = device.wgpu_module().gpu
    monkeypatch.setattr(device, "_webgpu", WebGPU("wgpu-native"))
    monkeypatch.setattr(gpu, "request_adapter_sync", lambda **_: gl)
    monkeypatch.setattr(gpu, "enumerate_adapters_sync", lambda: [gl, vk])
    assert device._request_adapter() is vk
    monkeypatch.setattr(gpu, "enumerate_adapters_sync", lambda: [gl])
    with pytest.raises(DeviceError) as err:
        device._request_adapter()
    assert str(err.value) == (
        "wgpu-native found only the OpenGL adapter 'llvmpipe (LLVM 15.0.6, 256 bits)': naga's "
        "GLSL does not keep WGSL's integer division, remainder and float-to-integer rules there "
        "(7u / 0u gives 0u where WGSL gives 7u), so kernels would run wrong; install a Vulkan "
        "driver (Debian: apt-get install mesa-vulkan-drivers)"
    )
    monkeypatch.setattr(gpu, "request_adapter_sync", lambda **_: vk)
    assert device._request_adapter() is vk
