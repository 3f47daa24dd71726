"""Every kernel at WebGPU's default limits: each catalog variant runs on a device requested with
no limit past the defaults (the defaults exactly), or with exactly the limits its ``index.json``
entry states (:func:`kvdsl.ir.features.limits`)."""

from __future__ import annotations

import time

import pytest

from kvdsl import catalog
from kvdsl.emit import emit
from kvdsl.harness import verify_variant
from kvdsl.ir.features import DEFAULT_LIMITS, limits
from kvdsl.runtime import device as webgpu
from tests.helpers.features import assert_ran_on_gpu


def _limits(dev) -> dict[str, int]:
    return {k: dev.limits[k] for k in webgpu.WEBGPU_LIMITS}


def test_default_limits_are_webgpus():
    """The defaults the devices are checked against are WebGPU's, and limits() names them as a
    JavaScript host does."""
    assert webgpu.WEBGPU_LIMITS["max-storage-buffers-per-shader-stage"] == 8
    assert webgpu.WEBGPU_LIMITS["max-compute-workgroup-storage-size"] == 16384
    assert webgpu.WEBGPU_LIMITS["max-storage-buffer-binding-size"] == 128 * 2**20
    assert webgpu.WEBGPU_LIMITS["max-buffer-size"] == 256 * 2**20
    for name, value in DEFAULT_LIMITS.items():
        assert webgpu.WEBGPU_LIMITS[webgpu.limit_name(name)] == value, name


def test_every_variant_runs_at_the_default_limits(gpu, capsys):
    """One small random case of every catalog variant on the GPU, judged against the reference,
    on the device its module gets: WebGPU's defaults exactly, or for a kernel stating limits
    those raised to exactly its need (the template's 9-10-binding drop-ins)."""
    webgpu.configure(None)
    start = time.perf_counter()
    raised = {}
    for name, cfg in catalog.VARIANTS.items():
        kernel = catalog.build(name)
        need = limits(kernel)
        result = verify_variant(name, cfg, kernel, 1, ("gpu",), seed=5)
        assert result.ok, result.problems
        assert_ran_on_gpu(result)
        dev = webgpu.device(*webgpu.extensions(emit(kernel)), need)
        want = webgpu.WEBGPU_LIMITS | {webgpu.limit_name(k): n for k, n in need.items()}
        assert _limits(dev) == want, name
        if need:
            raised[name] = need
    assert set(raised) == {n for n in catalog.VARIANTS if "template_bindings" in n}
    with capsys.disabled():
        print(f"\n{len(catalog.VARIANTS)} variants at default limits: "
              f"{time.perf_counter() - start:.1f} s")  # fmt: skip


def test_a_kernel_gets_exactly_the_limit_it_needs(gpu):
    """A kernel past the default storage buffers runs on a device requested with exactly its
    need; every other limit stays WebGPU's default, and other kernels keep the default device."""
    name = "append_quant_int8_knorm_rotary_template_bindings_qwen3_06b"
    kernel = catalog.build(name)
    assert limits(kernel) == {"maxStorageBuffersPerShaderStage": 10}
    result = verify_variant(name, catalog.config(name), kernel, 1, ("gpu",))
    assert result.ok, result.problems
    dev = webgpu.device(False, False, limits(kernel))
    assert _limits(dev) == webgpu.WEBGPU_LIMITS | {"max-storage-buffers-per-shader-stage": 10}
    assert _limits(webgpu.device()) == webgpu.WEBGPU_LIMITS
    assert dev is not webgpu.device()


def test_configure_raises_every_device_and_restores(gpu):
    """Benchmarks' opt-in: configured limits apply to every device (a kernel's need on top);
    configure(None) gives the defaults back."""
    try:
        got = webgpu.configure({"max-storage-buffers-per-shader-stage": 12})
        assert got["max-storage-buffers-per-shader-stage"] == 12
        assert _limits(webgpu.device())["max-storage-buffers-per-shader-stage"] == 12
        need = {"maxStorageBuffersPerShaderStage": 9}
        assert _limits(webgpu.device(limits=need))["max-storage-buffers-per-shader-stage"] == 12
        with pytest.raises(webgpu.DeviceError, match="unknown limits"):
            webgpu.configure({"maxStorageBuffersPerShaderStage": 12})
    finally:
        webgpu.configure(None)
    assert _limits(webgpu.device()) == webgpu.WEBGPU_LIMITS
