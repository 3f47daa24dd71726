"""Sampled textures as WebGPU runtimes read images: ``var tex: texture_2d<T>;`` (T ``f32``,
``u32`` or ``i32``) read by ``textureLoad(tex, coords, level)`` and sized by
``textureDimensions``, also through a helper's texture parameter. The host gives each as a
``[height, width, 4]`` array of T's dtype; the interpreter reads that array, and the GPU path
binds a real texture (``rgba32float``, ``rgba32uint``, ``rgba32sint``) holding it. Each sample
type runs on both backends as numpy says, on random texels; a texel read from the wrong place
or texture, or a channel swapped, fails."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import interp, runtime
from kvdsl.emit import emit
from kvdsl.frontend import WgslTypeError, parse
from kvdsl.interp import OutOfBounds
from kvdsl.ir.tree import Texture
from kvdsl.ir.types import SampledTexture, f32, i32, u32
from tests.helpers.wgsl import assert_refused_as_tint_refuses, assert_tint_takes
from tests.helpers.backends import assert_as_numpy

H, W = 10, 12

KERNEL = """@group(0) @binding(0) var<storage, read_write> out: array<vec4<{t}>>;
@group(0) @binding(1) var tex: texture_2d<{t}>;
@group(0) @binding(2) var ids: texture_2d<u32>;

fn at(t: texture_2d<u32>, p: vec2<u32>) -> vec4<u32> {{
  return textureLoad(t, p, 0u) % vec4<u32>(7u);
}}

@compute @workgroup_size(8, 8)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {{
  let size = textureDimensions(tex);
  if gid.x >= size.x || gid.y >= size.y {{
    return;
  }}
  let v = textureLoad(tex, vec2<i32>(i32(size.x - 1u - gid.x), i32(gid.y)), 0);
  let k = at(ids, gid.xy);
  out[gid.y * size.x + gid.x] = v.wzyx * {t}(k.y + 1u) + {t}(textureDimensions(ids, 0u).x);
}}
"""

DTYPES = {"f32": np.float32, "u32": np.uint32, "i32": np.int32}


def _texels(rng, t: str) -> np.ndarray:
    if t == "f32":
        return rng.standard_normal((H, W, 4)).astype(np.float32)
    if t == "u32":
        return rng.integers(1, 2**20, (H, W, 4)).astype(np.uint32)
    return rng.integers(-(2**20), 2**20, (H, W, 4)).astype(np.int32)


@pytest.mark.parametrize("t", DTYPES)
def test_each_sample_type_runs_on_both_backends_as_numpy_says(t, gpu):
    text = KERNEL.format(t=t)
    k = parse(text, f"{t}.wgsl")
    sample = {"f32": f32, "u32": u32, "i32": i32}[t]
    assert k.textures == (
        Texture("tex", SampledTexture(sample)),
        Texture("ids", SampledTexture(u32)),
    )
    assert k.functions[0].params[0] == ("t", SampledTexture(u32))
    printed = emit(k)
    assert "@group(0) @binding(1) var tex: texture_2d<" + t + ">;" in printed
    assert parse(printed, f"{t}.wgsl") == k
    rng = np.random.default_rng(52)
    tex = _texels(rng, t)
    ids = rng.integers(1, 2**32, (H, W + 3, 4)).astype(np.uint32)
    dt = DTYPES[t]
    scale = (ids[:, :W, 1:2] % 7 + 1).astype(dt)
    want = (tex[:, ::-1, ::-1] * scale + dt(W + 3)).astype(dt).reshape(-1, 4)
    for run in (interp.run, runtime.run):
        poison = np.full(H * W * 4, 7, dt)
        got = run(k, {"out": poison, "tex": tex, "ids": ids}, {}, (2, 2, 1))
        assert sorted(got) == ["out"]  # a sampled texture comes back from neither
        assert_as_numpy(got["out"].reshape(-1, 4), want, run, run.__module__)
    assert_tint_takes({t: text})


def test_a_texel_outside_or_a_level_past_the_first_is_out_of_bounds():
    text = KERNEL.format(t="f32")
    tex = np.ones((H, W, 4), np.float32)
    ids = np.ones((H, W, 4), np.uint32)
    bufs = {"out": np.zeros(H * W * 4, np.float32), "tex": tex, "ids": ids}
    outside = parse(text.replace("i32(gid.y)), 0)", "i32(gid.y) + 1i), 0)"), "outside.wgsl")
    with pytest.raises(OutOfBounds, match=r"^tex texel \(\d+, 10\) is out of bounds"):
        interp.run(outside, bufs, {}, (2, 2, 1))
    level = parse(text.replace("i32(gid.y)), 0)", "i32(gid.y)), 1)"), "level.wgsl")
    with pytest.raises(OutOfBounds, match=r"^tex level 1 is out of bounds .* one level"):
        interp.run(level, bufs, {}, (2, 2, 1))
    sized = parse(text.replace("textureDimensions(ids, 0u)", "textureDimensions(ids, 2u)"), "s")
    with pytest.raises(OutOfBounds, match=r"^ids level 2 is out of bounds \(one level\)"):
        interp.run(sized, bufs, {}, (2, 2, 1))
    k = parse(text, "t.wgsl")
    with pytest.raises(TypeError, match=r"texture 'tex' .* expected float32\[height, width, 4\]"):
        interp.run(k, bufs | {"tex": np.ones((H, W, 4), np.uint32)}, {}, (2, 2, 1))


def test_what_wgsl_refuses_of_a_sampled_texture_is_refused_as_tint_refuses_it():
    text = KERNEL.format(t="f32")
    store = text.replace(
        "  return;\n", "  return;\n  }\n  {\n  textureStore(tex, gid.xy, vec4f());\n"
    )
    assert_refused_as_tint_refuses(store, WgslTypeError, r"'tex' is a texture_2d<f32>, which")
    load = text.replace("textureLoad(t, p, 0u)", "textureLoad(t, p)")
    assert_refused_as_tint_refuses(load, WgslTypeError, r"no matching call to 'textureLoad\(")
    store_text = "var img: texture_storage_2d<r32uint, write>;\n"
    sized = text.replace(
        "var ids: texture_2d<u32>;\n",
        "var ids: texture_2d<u32>;\n" + "@group(0) @binding(3) " + store_text,
    )
    sized = sized.replace("textureDimensions(ids, 0u)", "textureDimensions(img, 0u)")
    assert_refused_as_tint_refuses(
        sized,
        WgslTypeError,
        r"'img' is a texture_storage_2d<r32uint, write>, which has no mip levels",
    )
    wrong = text.replace("let v = textureLoad(tex,", "let v: vec4<u32> = textureLoad(tex,")
    assert_refused_as_tint_refuses(wrong, WgslTypeError, r"vec4<f32>")
