"""Choosing the WebGPU implementation: wgpu-native (default) or Dawn (``use_webgpu(WebGPU("dawn"))``;
``KVDSL_WEBGPU=dawn`` or ``kvdsl --webgpu dawn`` at the command line).

Dawn finds no adapter on llvmpipe, so CI drives it on its Null backend (``WGPU_BACKEND_TYPE=Null``),
which creates devices and compiles pipelines with Tint but executes nothing: these tests check the
plumbing (devices, features, shader text, errors). Dawn running the catalog for real is
``kvdsl --webgpu dawn verify`` on a GPU host (``benchmarks/all.sh``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from kvdsl import cli
from tests.helpers.paths import ROOT


def python(code: str, **env: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter (the implementation is chosen once per process)."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=os.environ | env,
    )


def kvdsl(*args: str, **env: str) -> subprocess.CompletedProcess:
    return python(f"import sys; from kvdsl.cli import main; sys.exit(main({list(args)!r}))", **env)


def test_cli_choices_are_the_runtime_implementations():
    from kvdsl.runtime import IMPLEMENTATIONS

    assert cli.WEBGPU == IMPLEMENTATIONS


@pytest.mark.parametrize(
    "env, message",
    [
        ({"KVDSL_WEBGPU": "webgl"}, "KVDSL_WEBGPU='webgl': expected one of wgpu-native, dawn"),
        ({"KVDSL_LOOP_BOUNDING": "off"}, "KVDSL_LOOP_BOUNDING='off': expected 0 or 1"),
        (
            {"KVDSL_WEBGPU": "dawn", "KVDSL_DAWN_DISABLE": "no_such_toggle"},
            "KVDSL_DAWN_DISABLE='no_such_toggle': Unknown Dawn toggle 'no_such_toggle'",
        ),
        (
            {
                "KVDSL_WEBGPU": "dawn",
                "KVDSL_DAWN_DISABLE": "disable_workgroup_init",
                "KVDSL_DAWN_ENABLE": "vulkan_enable_f16_on_nvidia, no_such_toggle",
            },
            "KVDSL_DAWN_ENABLE='vulkan_enable_f16_on_nvidia, no_such_toggle': Unknown Dawn "
            "toggle 'no_such_toggle'",
        ),
    ],
)
def test_bad_implementation_settings_are_one_line(env, message):
    out = kvdsl("verify", "copy_flat_llama31_8b", "--cases", "1", **env)
    assert out.returncode == 1, out.stderr
    assert out.stderr.strip() == f"kvdsl verify: {message}" + (
        ": see all_toggles()" if "toggle" in message else ""
    )


def test_webgpu_flag_cannot_switch_a_loaded_runtime(monkeypatch, capsys):
    from kvdsl.runtime import device

    device.wgpu_module()  # loaded on wgpu-native, as in every test process

    monkeypatch.setenv("KVDSL_WEBGPU", "wgpu-native")  # restored after the test
    assert cli.main(["--webgpu", "dawn", "list"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (
        "kvdsl: --webgpu dawn: this process already runs kernels on wgpu-native; "
        "the implementation is chosen once per process"
    )
    assert cli.main(["--webgpu", "wgpu-native", "list"]) == 0
    assert "copy_flat_llama31_8b" in capsys.readouterr().out


def test_settings_from_the_environment():
    from kvdsl.runtime import DeviceError, WebGPU

    assert WebGPU.from_environment({}) == WebGPU() == WebGPU("wgpu-native", (), (), True)
    assert WebGPU.from_environment({"KVDSL_WEBGPU": " dawn "}) == WebGPU("dawn")
    assert WebGPU.from_environment({"KVDSL_WEBGPU": "dawn"}, "wgpu-native") == WebGPU()
    env = {"KVDSL_WEBGPU": "dawn", "KVDSL_DAWN_ENABLE": "vulkan_enable_f16_on_nvidia, "}
    got = WebGPU.from_environment(env | {"KVDSL_DAWN_DISABLE": "disable_workgroup_init"})
    assert got == WebGPU("dawn", ("vulkan_enable_f16_on_nvidia",), ("disable_workgroup_init",))
    assert got.dawn_toggles == {
        "enable": ["vulkan_enable_f16_on_nvidia"],
        "disable": ["disable_workgroup_init"],
    }
    # Dawn's toggles are read under dawn only, as before.
    assert WebGPU.from_environment({"KVDSL_DAWN_ENABLE": "no_such_toggle"}) == WebGPU()
    assert WebGPU().dawn_toggles is None
    with pytest.raises(DeviceError, match="^WebGPU implementation 'webgl': expected one of"):
        WebGPU("webgl")
    with pytest.raises(DeviceError, match="^Dawn toggles under wgpu-native"):
        WebGPU(dawn_enable=("vulkan_enable_f16_on_nvidia",))


def test_another_implementation_after_loading_is_refused():
    from kvdsl.runtime import WebGPU, WebGPULoaded, current_webgpu, device, use_webgpu

    device.wgpu_module()
    loaded = current_webgpu()
    other = WebGPU("dawn" if loaded.implementation == "wgpu-native" else "wgpu-native")
    with pytest.raises(WebGPULoaded, match="the implementation is chosen once per process$"):
        use_webgpu(other)
    use_webgpu(loaded)  # the same choice again is no change
    assert current_webgpu() == loaded


def test_dawn_makes_one_device_per_adapter_and_keeps_enable_subgroups():
    # Four feature sets, four devices: WebGPU lets an adapter make one device (Dawn enforces it),
    # so each after the first needs a fresh adapter; Tint requires `enable subgroups;`, which
    # the naga path strips.
    out = python(
        """
        import json
        from kvdsl import catalog
        from kvdsl.emit import emit
        from kvdsl.runtime import WebGPU, adapter_info, compile_wgsl, device, use_webgpu

        from kvdsl.ir import KernelBuilder, f16, shuffle_xor

        # No catalog variant enables both f16 and subgroups (the flat walks carry f16 in u32
        # words): a kernel made for it.
        kb = KernelBuilder("both", 64)
        src, dst = kb.binding("src", f16, "read"), kb.binding("dst", f16, "read_write")
        dst[kb.gid.x] = shuffle_xor(src[kb.gid.x], 1)
        texts = {
            k: emit(catalog.build_config(catalog.config(v), k))
            for k, v in (
                ("plain", "copy_flat_llama31_8b"),
                ("f16", "transpose_vec4_f16_llama31_8b"),
                ("subgroups", "build_knorm_flat_sg_qwen3_06b"),
            )
        }
        texts["f16+subgroups"] = emit(kb.build(None))
        use_webgpu(WebGPU("dawn"))
        for text in texts.values():
            compile_wgsl(text)
        print(json.dumps({
            "implementation": adapter_info()["implementation"],
            "backend": adapter_info()["backend"],
            "devices": sorted(map(list, device._devices)),
            "kept": device.shader_source(texts["subgroups"]) == texts["subgroups"],
            "enables": "enable subgroups;" in texts["subgroups"],
        }))
        """,
        WGPU_BACKEND_TYPE="Null",
    )
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.splitlines()[-1])
    assert got == {
        "implementation": "dawn",
        "backend": "Null",
        # (f16, subgroups, limits past the defaults): none of these modules needs any.
        "devices": [[False, False, []], [False, True, []], [True, False, []], [True, True, []]],
        "kept": True,
        "enables": True,
    }


def test_wgpu_native_strips_enable_subgroups_for_naga():
    from kvdsl.runtime import device

    text = (ROOT / "emitted" / "build_knorm_flat_sg_qwen3_06b.wgsl").read_text()
    assert device.current_webgpu().implementation == "wgpu-native"
    assert "enable subgroups;" in text
    stripped = device.shader_source(text)
    assert "enable subgroups;" not in stripped
    assert stripped.count("\n") == text.count("\n")  # naga's line numbers stay the module's
