"""benchmarks/shaderstats.py and its Vulkan layer: the SPIR-V an implementation hands the driver,
captured on this machine's adapter and summarised by opcode class."""

from __future__ import annotations

import shutil
import struct

import pytest

from tests.helpers.paths import benchmark

shaderstats = benchmark("shaderstats")


def test_summary_counts_instructions_by_class():
    # Header, OpCapability Shader, OpControlBarrier %2 %2 %3, OpLoad %4 %5 %6 and an opcode of
    # no class (OpNop).
    words = [0x07230203, 0x00010000, 0, 7, 0]
    words += [(2 << 16) | 17, 1, (4 << 16) | 224, 2, 2, 3, (4 << 16) | 61, 4, 5, 6, (1 << 16) | 0]
    got = shaderstats.summary(struct.pack(f"<{len(words)}I", *words))
    assert got == {"words": 16, "instructions": 4, "other": 2, "barrier": 1, "load": 1}


@pytest.mark.usefixtures("gpu")
def test_layer_captures_the_spirv_of_each_variant(tmp_path, monkeypatch):
    # scripts/setup.sh installs gcc: a machine without it is not set up, not a reason to skip.
    if shutil.which("gcc") is None:
        pytest.fail(
            "no gcc to build the Vulkan layer (benchmarks/vklayer): run scripts/setup.sh, or "
            "install gcc and libc6-dev (apt-get install gcc libc6-dev)"
        )
    layer = tmp_path / "layer"
    layer.mkdir()
    for name in ("kvdsl_dump_layer.c", "kvdsl_dump_layer.json"):
        shutil.copy(shaderstats.LAYER / name, layer / name)
    assert shaderstats.build_layer(layer).is_file()
    variants = ["build_knorm_sg_qwen3_06b", "build_knorm_qwen3_06b", "build_flat_llama31_8b"]
    got = shaderstats.measure("wgpu-native", variants, tmp_path / "dump", layer)
    rows = got["rows"]
    assert list(rows) == variants and all(r["module"] for r in rows.values())
    # The subgroup drop-in shuffles and passes two barriers in its narrow branch; the workgroup
    # one passes two a step (the reduction's and the step's end); the flat build none.
    sg, wg, plain = (rows[v]["spirv"] for v in variants)
    assert sg["group"] >= 1 and sg["barrier"] == 2
    assert wg.get("group", 0) == 0 and wg["barrier"] == 2
    assert plain.get("barrier", 0) == 0 and plain["store"] >= 2 and plain["words"] > 100
    assert got["layer"] and got["layer"][0].startswith("device: VK_KHR_pipeline_executable")
    assert {r["spirv"]["memory_model"] for r in rows.values()} == {1}  # naga: GLSL450
    # The diagnostic declares naga's modules in the Vulkan memory model, as Tint writes them.
    monkeypatch.setenv("KVDSL_VULKAN_MEMORY_MODEL", "1")
    got = shaderstats.measure("wgpu-native", variants[:1], tmp_path / "vulkan", layer)
    assert got["rows"][variants[0]]["spirv"]["memory_model"] == 3
    assert "Vulkan memory model set" in got["layer"][0]
    # Without loop bounding naga's step loop loses its counter; a kernel without a loop is as
    # it was.
    monkeypatch.delenv("KVDSL_VULKAN_MEMORY_MODEL")
    monkeypatch.setenv("KVDSL_LOOP_BOUNDING", "0")
    free = shaderstats.measure("wgpu-native", variants[1:], tmp_path / "free", layer)["rows"]
    assert free[variants[1]]["spirv"]["words"] < wg["words"]
    assert free[variants[1]]["spirv"]["branch"] < wg["branch"]
    assert free[variants[2]]["spirv"] == plain
