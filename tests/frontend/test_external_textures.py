"""``texture_external``: ``textureLoad(t, coords)``, ``textureSampleBaseClampToEdge`` through the
default sampler (in a helper taking the texture and the sampler) and ``textureDimensions``, on
the interpreter over random non-zero f16 texels into a poisoned output, to what numpy says; Tint
takes the text and its print, naga refuses it (wgpu-native has no external textures); what WGSL
refuses of it is refused as Tint refuses it, a texel past the texture is out of bounds in the
interpreter, and a host array the plane does not hold is refused by name. On the GPU only Dawn
makes an external texture: its Null backend creates the pipeline and binds the texture (it
executes nothing), wgpu-native refuses the kernel naming the binding, and where Dawn has an
adapter (a GPU host) the kernel runs on it to what the interpreter says."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from kvdsl import interp, runtime
from kvdsl.emit import emit
from kvdsl.frontend import WgslTypeError, parse
from kvdsl.interp import OutOfBounds
from kvdsl.runtime import BufferError, tint_check
from tests.helpers.paths import ROOT
from tests.helpers.wgsl import refused_by_compilers

N, H, W = 128, 5, 7  # invocations; the plane's height and width
TEXT = (
    "@group(0) @binding(0) var<storage, read> a: array<u32>;\n"
    "@group(0) @binding(1) var<storage, read_write> out: array<vec4<f32>>;\n"
    "@group(0) @binding(2) var t: texture_external;\n"
    "@group(0) @binding(3) var s: sampler;\n"
    "fn sampled(tx: texture_external, sm: sampler, uv: vec2<f32>) -> vec4<f32> {\n"
    "  return textureSampleBaseClampToEdge(tx, sm, uv);\n}\n"
    "@compute @workgroup_size(64)\n"
    "fn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
    "  let i = gid.x;\n  let o = i * 3u;\n  let v = a[i];\n"
    "  let dims = textureDimensions(t);\n"
    "  let c = vec2<u32>(v % dims.x, (v / 8u) % dims.y);\n"
    "  let uv = (vec2<f32>(f32(v % 11u), f32(v % 9u)) - 1.5) / vec2<f32>(dims);\n"
    "  out[o] = textureLoad(t, c);\n"
    "  out[o + 1u] = sampled(t, s, uv) + textureLoad(t, vec2<i32>(c));\n"
    "  out[o + 2u] = vec4<f32>(vec2<f32>(dims), f32(v % 7u), 1.0);\n}\n"
)


def _inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(4448)
    # f16 values, as the plane (rgba16float) holds them, of both signs, none zero
    plane = rng.uniform(0.25, 8.0, (H, W, 4)) * rng.choice([-1.0, 1.0], (H, W, 4))
    return {
        "a": rng.integers(1, 1 << 20, N, dtype=np.uint32),
        "out": np.full((N * 3, 4), np.nan, np.float32),
        "t": plane.astype(np.float16).astype(np.float32),
    }


def _want() -> np.ndarray:
    given = _inputs()
    a, t, f = given["a"].astype(np.int64), given["t"], np.float32
    x, y = a % W, (a // 8) % H
    # uv is the centre of texel (v % 11 - 2, v % 9 - 2); the edge's clamp, half a texel in,
    # takes the texel at the edge for those past it.
    sampled = t[np.clip(a % 9 - 2, 0, H - 1), np.clip(a % 11 - 2, 0, W - 1)]
    dims = np.stack([np.full(N, W, f), np.full(N, H, f), (a % 7).astype(f), np.ones(N, f)], 1)
    return np.stack([t[y, x], sampled + t[y, x], dims], axis=1).reshape(N * 3, 4)


def test_the_text_prints_back_as_it_reads():
    k = parse(TEXT)
    assert parse(emit(k)) == k


def test_an_external_texture_reads_as_numpy_says():
    got = interp.run(parse(TEXT), _inputs(), {}, (N // 64, 1, 1))["out"]
    np.testing.assert_array_equal(got, _want())


def test_tint_takes_the_text_and_its_print_and_naga_refuses_it():
    refused = refused_by_compilers({"text": TEXT, "printed": emit(parse(TEXT))})
    assert set(refused) == {"text", "printed"}
    for why in refused.values():  # naga parses it, but wgpu-native grants no external textures
        assert why.startswith("naga: ") and "Capabilities(TEXTURE_EXTERNAL) is required" in why


def test_a_texel_past_the_texture_is_out_of_bounds():
    text = TEXT.replace("out[o] = textureLoad(t, c);", "out[o] = textureLoad(t, c + 2u);")
    with pytest.raises(OutOfBounds, match=r"t texel \(\d+, \d+\) is out of bounds \(width 7"):
        interp.run(parse(text), _inputs(), {}, (N // 64, 1, 1))


#: What WGSL refuses of an external texture: name -> (the text's call, the call refused,
#: kvdsl's words, Tint's); an external texture has no level, no layer and no store.
REFUSED = {
    "a_level_of_textureLoad": (
        "textureLoad(t, c)",
        "textureLoad(t, c, 0)",
        "no matching call to 'textureLoad(texture_external, vec2<u32>, i32)'",
        "no matching call to 'textureLoad(texture_external, vec2<u32>, abstract-int)'",
    ),
    "a_level_of_textureDimensions": (
        "textureDimensions(t);",
        "textureDimensions(t, 0);",
        "no matching call to 'textureDimensions(texture_external, i32)'",
        "no matching call to 'textureDimensions(texture_external, abstract-int)'",
    ),
    "textureSampleLevel": (
        "sampled(t, s, uv)",
        "textureSampleLevel(t, s, uv, 0.0)",
        "no matching call to 'textureSampleLevel(texture_external, sampler, vec2<f32>, f32)'",
        "no matching call to 'textureSampleLevel(texture_external, sampler, vec2<f32>, "
        "abstract-float)'",
    ),
    "textureSampleGrad": (
        "sampled(t, s, uv)",
        "textureSampleGrad(t, s, uv, uv, uv)",
        "no matching call to 'textureSampleGrad(texture_external, sampler, vec2<f32>, "
        "vec2<f32>, vec2<f32>)'",
        "no matching call to 'textureSampleGrad(texture_external, sampler, vec2<f32>, "
        "vec2<f32>, vec2<f32>)'",
    ),
    "textureGather": (
        "sampled(t, s, uv)",
        "textureGather(0, t, s, uv)",
        "no matching call to 'textureGather(i32, texture_external, sampler, vec2<f32>)'",
        "no matching call to 'textureGather(abstract-int, texture_external, sampler, vec2<f32>)'",
    ),
    "textureNumLevels": (
        "f32(v % 7u)",
        "f32(textureNumLevels(t))",
        "no matching call to 'textureNumLevels(texture_external)'",
        "no matching call to 'textureNumLevels(texture_external)'",
    ),
    "textureNumLayers": (
        "f32(v % 7u)",
        "f32(textureNumLayers(t))",
        "no matching call to 'textureNumLayers(texture_external)'",
        "no matching call to 'textureNumLayers(texture_external)'",
    ),
    "textureStore": (
        "out[o] = textureLoad(t, c);",
        "textureStore(t, c, vec4<f32>(1.0));",
        "'t' is a texture_external, which textureStore does not take",
        "no matching call to 'textureStore(texture_external, vec2<u32>, vec4<f32>)'",
    ),
    "float_coordinates_of_textureLoad": (
        "textureLoad(t, c)",
        "textureLoad(t, vec2<f32>(c))",
        "the coordinates are vec2<f32>, expected vec2<i32> or vec2<u32>",
        "no matching call to 'textureLoad(texture_external, vec2<f32>)'",
    ),
}


def test_what_wgsl_refuses_of_an_external_texture_is_refused_as_tint_refuses_it():
    texts = {}
    for name, (call, refused, words, _) in REFUSED.items():
        assert call in TEXT, name
        texts[name] = TEXT.replace(call, refused, 1)
        with pytest.raises(WgslTypeError) as info:
            parse(texts[name])
        assert words in str(info.value), name
    tint = tint_check(texts)
    assert {n: t[3] in (tint[n] or "") for n, t in REFUSED.items()} == dict.fromkeys(REFUSED, True)


def _with(t: np.ndarray, at: tuple[int, ...], value: float) -> np.ndarray:
    """``t`` with ``value`` at ``at``, as ``float32``."""
    t = t.copy()
    t[at] = value
    return t


#: Host arrays the plane does not hold: name -> (the array, the words of its refusal).
BAD_PLANES = {
    "a_value_f16_does_not_hold": (
        lambda t: _with(t, (1, 0, 1), 0.1),
        r"'t' \(texture_external\) holds 0.1 at \[1, 0, 1\]: an external texture's values are "
        r"finite f16 values \(its plane, rgba16float, holds f16\)",
    ),
    "an_infinite_value": (
        lambda t: _with(t, (0, 1, 2), np.inf),
        r"'t' \(texture_external\) holds inf at \[0, 1, 2\]: an external texture's values",
    ),
    "three_channels": (
        lambda t: t[..., :3],
        r"texture 't' \(texture_external\) is given as float32\[5, 7, 3\]: expected "
        r"float32\[height, width, 4\]",
    ),
}


@pytest.mark.parametrize("backend", ["interp", "gpu"])
@pytest.mark.parametrize("name", BAD_PLANES)
def test_a_plane_the_texture_does_not_hold_is_refused_by_name(backend, name):
    # The runtime refuses the host's arrays before it asks for a device (no GPU is reached).
    bad, words = BAD_PLANES[name]
    given = _inputs()
    given["t"] = bad(given["t"])
    with pytest.raises((TypeError, BufferError), match=words):
        (interp if backend == "interp" else runtime).run(parse(TEXT), given, {}, (N // 64, 1, 1))


#: Runs the kernel on Dawn (``sys.argv[1]``: where the output goes, as .npy) and prints the
#: adapter's backend; prints ``null`` where Dawn finds no adapter.
ON_DAWN = """
    import json, sys
    import numpy as np
    from kvdsl import runtime
    from kvdsl.frontend import parse
    from kvdsl.runtime import DeviceError, WebGPU, adapter_info, use_webgpu
    from tests.frontend.test_external_textures import N, TEXT, _inputs

    use_webgpu(WebGPU("{implementation}"))
    try:
        backend = adapter_info()["backend"]
    except DeviceError:
        print(json.dumps(None))
        sys.exit(0)
    try:
        got = runtime.run(parse(TEXT), _inputs(), {{}}, (N // 64, 1, 1))["out"]
    except DeviceError as err:
        print(json.dumps({{"backend": backend, "refused": str(err)}}))
        sys.exit(0)
    np.save(sys.argv[1], got)
    print(json.dumps({{"backend": backend, "shape": list(got.shape)}}))
"""


def _on(implementation: str, out: str, env: dict[str, str]) -> dict | None:
    """What :data:`ON_DAWN` prints, run in a fresh interpreter (the WebGPU implementation is
    chosen once per process) under ``implementation`` in environment ``env``, the output
    saved to ``out``."""
    code = textwrap.dedent(ON_DAWN.format(implementation=implementation))
    done = subprocess.run(
        [sys.executable, "-c", code, out], cwd=ROOT, capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_dawn_binds_an_external_texture_on_its_null_backend(tmp_path):
    # The Null backend creates the pipeline, the plane and the external texture, binds them and
    # takes the dispatch; it executes nothing, so the output is not looked at.
    got = _on("dawn", str(tmp_path / "out.npy"), os.environ | {"WGPU_BACKEND_TYPE": "Null"})
    assert got == {"backend": "Null", "shape": [N * 3, 4]}


def test_wgpu_native_refuses_an_external_texture_naming_the_binding(tmp_path):
    got = _on("wgpu-native", str(tmp_path / "out.npy"), dict(os.environ))
    assert got is not None, "GPU tests need a wgpu adapter (llvmpipe will do)"
    assert got["refused"] == (
        "texture 't' is a texture_external: it needs Dawn (--webgpu dawn, KVDSL_WEBGPU=dawn or "
        "use_webgpu(WebGPU('dawn'))), as wgpu-native cannot make an external texture (the "
        "interpreter runs the kernel: kvdsl run --backend interp)"
    )


#: Why the test of the kernel on Dawn for real does not run where Dawn has no adapter.
NO_DAWN_ADAPTER = (
    "Dawn has no adapter here (llvmpipe; its Null backend executes nothing): run on a GPU host, "
    "pytest tests/frontend/test_external_textures.py -k on_dawn"
)


def test_an_external_texture_reads_on_dawn_as_the_interpreter_says(tmp_path):
    # Dawn's own choice of adapter, WGPU_BACKEND_TYPE left out: a GPU where there is one,
    # else none (its Vulkan backend refuses llvmpipe).
    env = {k: v for k, v in os.environ.items() if k != "WGPU_BACKEND_TYPE"}
    out = tmp_path / "out.npy"
    got = _on("dawn", str(out), env)
    if got is None or got["backend"] == "Null":
        pytest.skip(NO_DAWN_ADAPTER)
    assert "refused" not in got, got["refused"]
    want = interp.run(parse(TEXT), _inputs(), {}, (N // 64, 1, 1))["out"]
    np.testing.assert_array_equal(np.load(out), want)
