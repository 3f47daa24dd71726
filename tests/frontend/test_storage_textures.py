"""Storage textures as WebGPU runtimes write images: ``var img: texture_storage_2d<format,
write>;`` written by ``textureStore`` and sized by ``textureDimensions``. The host gives and takes
each as a ``[height, width, channels]`` array of the format's dtype; the interpreter holds it so,
converting each stored ``vec4`` to the format (``rgba8unorm``: ``round(clamp(v, 0, 1) * 255)``),
and the GPU path binds a real texture and reads it back. Each format runs on both backends as
numpy says, the texels a kernel skips keeping the poison they were given."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from kvdsl import interp, runtime
from kvdsl.emit import emit
from kvdsl.frontend import WgslTypeError, parse
from kvdsl.interp import OutOfBounds, RaceError
from kvdsl.ir.tree import Texture
from kvdsl.ir.types import StorageTexture
from tests.helpers.paths import ROOT
from tests.helpers.wgsl import assert_refused_as_tint_refuses, assert_tint_takes
from tests.helpers.backends import assert_as_numpy, ieee_adapter

H, W = 10, 12

# format: (the vec4's element type, the source values, the poison of the texels left alone)
FORMATS = {
    "rgba8unorm": ("f32", lambda r, n: r.uniform(-0.3, 1.3, (n, 4)), 0xAB),
    "rgba32float": ("f32", lambda r, n: r.standard_normal((n, 4)) * 100, np.nan),
    "r32float": ("f32", lambda r, n: r.standard_normal((n, 4)), np.nan),
    "r32uint": ("u32", lambda r, n: r.integers(0, 2**32, (n, 4)), 0xDEADBEEF),
    "r32sint": ("i32", lambda r, n: r.integers(-(2**31), 2**31, (n, 4)), -7),
    "rgba32uint": ("u32", lambda r, n: r.integers(0, 2**32, (n, 4)), 0xDEADBEEF),
}


def _text(fmt: str, elem: str) -> str:
    return f"""@group(0) @binding(0) var<storage, read> x: array<vec4<{elem}>>;
@group(0) @binding(1) var img: texture_storage_2d<{fmt}, write>;

@compute @workgroup_size(8, 8)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {{
  let size = textureDimensions(img);
  if gid.x >= size.x || gid.y >= size.y || (gid.x + gid.y) % 3u == 0u {{
    return;
  }}
  textureStore(img, vec2<i32>(i32(gid.x), i32(size.y - 1u - gid.y)), x[gid.y * size.x + gid.x]);
}}
"""


def _want(ty: StorageTexture, x: np.ndarray, poison) -> np.ndarray:
    out = np.full((H, W, ty.channels), poison, ty.dtype)
    v = x.reshape(H, W, 4)[:, :, : ty.channels]
    if ty.format == "rgba8unorm":
        v = np.rint(np.clip(v.astype(np.float64), 0, 1) * 255)
    v = v.astype(ty.dtype)
    gy, gx = np.mgrid[0:H, 0:W]
    keep = (gx + gy) % 3 != 0
    out[H - 1 - gy[keep], gx[keep]] = v[keep]
    return out


@pytest.mark.parametrize("fmt", FORMATS)
def test_each_format_runs_on_both_backends_as_numpy_says(fmt, gpu):
    elem, values, poison = FORMATS[fmt]
    text = _text(fmt, elem)
    k = parse(text, f"{fmt}.wgsl")
    assert k.textures == (Texture("img", StorageTexture(fmt)),)
    assert parse(emit(k), f"{fmt}.wgsl") == k
    ty = k.textures[0].ty
    x = values(np.random.default_rng(50), H * W).astype({"f32": np.float32, "u32": np.uint32,
                                                          "i32": np.int32}[elem])  # fmt: skip
    want = _want(ty, x, poison)
    for run in (interp.run, runtime.run):
        img = np.full((H, W, ty.channels), poison, ty.dtype)
        got = run(k, {"x": x.reshape(-1), "img": img}, {}, (2, 2, 1))["img"]
        # A float stored as a unorm or snorm code may round the other way on a GPU.
        assert_as_numpy(got, want, run, run.__module__, codes=True)
        assert (img == np.full_like(img, poison)).all() or np.isnan(poison)  # not the caller's
    assert_tint_takes({fmt: text})


def test_two_invocations_writing_one_texel_race_and_a_texel_outside_is_out_of_bounds():
    text = _text("r32float", "f32")
    x = np.ones(H * W * 4, np.float32)
    img = np.zeros((H, W, 1), np.float32)
    raced = parse(text.replace("i32(size.y - 1u - gid.y)", "0i"), "raced.wgsl")
    with pytest.raises(RaceError, match=r"^img texel \(\d+, 0\): invocation gid=.* both write"):
        interp.run(raced, {"x": x, "img": img}, {}, (2, 2, 1))
    outside = parse(text.replace("i32(size.y - 1u - gid.y)", "i32(gid.y) + 1i"), "out.wgsl")
    with pytest.raises(OutOfBounds, match=r"^img texel \(\d+, 10\) is out of bounds"):
        interp.run(outside, {"x": x, "img": img}, {}, (2, 2, 1))


def test_a_texture_given_in_another_shape_or_dtype_is_refused_by_name():
    k = parse(_text("rgba8unorm", "f32"), "t.wgsl")
    x = np.ones(H * W * 4, np.float32)
    with pytest.raises(Exception, match=r"texture 'img' .* expected uint8\[height, width, 4\]"):
        runtime.run(k, {"x": x, "img": np.zeros((H, W, 4), np.float32)}, {}, (2, 2, 1))
    with pytest.raises(TypeError, match=r"texture 'img' .* expected uint8\[height, width, 4\]"):
        interp.run(k, {"x": x, "img": np.zeros((H, W), np.uint8)}, {}, (2, 2, 1))


def test_what_wgsl_refuses_of_a_storage_texture_is_refused_as_tint_refuses_it():
    text = _text("rgba8unorm", "f32").replace(", x[gid.y * size.x + gid.x])", ", 1.0)")
    assert_refused_as_tint_refuses(text, WgslTypeError, r"the value is f32, expected vec4<f32>")
    read_write = _text("rgba8unorm", "f32").replace("write>", "read_write>")
    assert_refused_as_tint_refuses(read_write, WgslTypeError, r"does not support storage texture")


def test_kvdsl_run_takes_a_texture_from_the_inputs_and_writes_both_backends(tmp_path, gpu):
    x = np.random.default_rng(51).uniform(-0.3, 1.3, (H * W, 4)).astype(np.float32)
    poison = np.full((H, W, 4), 0xAB, np.uint8)
    (tmp_path / "img.wgsl").write_text(_text("rgba8unorm", "f32"))
    np.savez(tmp_path / "in.npz", x=x.reshape(-1), img=poison)
    args = [str(tmp_path / "img.wgsl"), "--inputs", str(tmp_path / "in.npz")]
    args += ["--workgroups", "2,2,1", "--backend", "both", "--out", str(tmp_path / "out.npz")]
    run = subprocess.run(
        [sys.executable, "-m", "kvdsl", "run", *args], cwd=ROOT, capture_output=True, text=True
    )
    if ieee_adapter():
        assert run.returncode == 0, run.stdout + run.stderr
        assert "img: uint8[10, 12, 4], GPU == interpreter" in run.stdout
    else:  # a unorm code may round the other way on another GPU: run says where it does
        assert run.returncode in (0, 1) and run.stdout.startswith("img: uint8[10, 12, 4], ")
    got = np.load(tmp_path / "out.npz")
    want = _want(StorageTexture("rgba8unorm"), x, 0xAB)
    assert_as_numpy(got["img"], want, "gpu", "img", codes=True)
    np.testing.assert_array_equal(got["interp.img"], want)


# Two textures through one helper's texture parameter, the helper handing it on to another,
# each sized through the parameter: a texel stored into the other texture, or the size of the
# other read, fails.
PARAM = """@group(0) @binding(0) var<storage, read> x: array<vec4<u32>>;
@group(0) @binding(1) var a: texture_storage_2d<r32uint, write>;
@group(0) @binding(2) var b: texture_storage_2d<rgba32uint, write>;

fn store(t: texture_storage_2d<rgba32uint, write>, at: vec2<u32>, v: vec4<u32>) {
  textureStore(t, at, v);
}

fn put(t: texture_storage_2d<r32uint, write>, u: texture_storage_2d<rgba32uint, write>,
       gid: vec2<u32>, v: vec4<u32>) {
  let size = textureDimensions(t);
  if gid.x < size.x && gid.y < size.y {
    textureStore(t, vec2<i32>(i32(size.x - 1u - gid.x), i32(gid.y)), v);
  }
  if gid.x < textureDimensions(u).x && gid.y < textureDimensions(u).y {
    store(u, gid, v ^ vec4<u32>(size.x, size.y, 0u, 1u));
  }
}

@compute @workgroup_size(8, 8)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  put(a, b, gid.xy, x[gid.y * 16u + gid.x]);
}
"""


def test_a_storage_texture_as_a_helpers_parameter_runs_on_both_backends_as_numpy_says(gpu):
    k = parse(PARAM, "param.wgsl")
    assert k.functions[0].params[0] == ("t", StorageTexture("rgba32uint"))
    assert k.functions[1].params[:2] == (
        ("t", StorageTexture("r32uint")),
        ("u", StorageTexture("rgba32uint")),
    )
    printed = emit(k)
    assert "fn store(t: texture_storage_2d<rgba32uint, write>, at: vec2<u32>" in printed
    assert parse(printed, "param.wgsl") == k
    x = np.random.default_rng(51).integers(1, 2**32, (16 * 16, 4)).astype(np.uint32)
    xs = x.reshape(16, 16, 4)
    wa, ha, wb, hb = 12, 10, 9, 14
    want_a = np.full((ha, wa, 1), 0xDEADBEEF, np.uint32)
    want_a[:, ::-1, 0] = xs[:ha, :wa, 0]
    want_b = xs[:hb, :wb] ^ np.array([wa, ha, 0, 1], np.uint32)
    for run in (interp.run, runtime.run):
        bufs = {
            "x": x.reshape(-1),
            "a": np.full((ha, wa, 1), 0xDEADBEEF, np.uint32),
            "b": np.full((hb, wb, 4), 0xDEADBEEF, np.uint32),
        }
        got = run(k, bufs, {}, (2, 2, 1))
        np.testing.assert_array_equal(got["a"], want_a, err_msg=run.__module__)
        np.testing.assert_array_equal(got["b"], want_b, err_msg=run.__module__)
    assert_tint_takes({"param": PARAM})
