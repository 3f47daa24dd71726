"""Storage textures of ``read`` and ``read_write`` access: ``textureLoad(t, coords)`` (a
``vec4`` of the format's channel type, an ``r32`` format's ``(x, 0, 0, 1)``) and, of a
``read_write`` one, ``textureStore``; on the interpreter and on the GPU (llvmpipe will do) over
random non-zero texels into poisoned outputs, to what numpy says. The interpreter finds the
races of one invocation reading a texel another writes; what WGSL refuses of them is refused as
Tint refuses it, a ``read_write`` texture of a format WebGPU binds no such texture in among
them (the misused accesses are conformance cases: ``cases/textures/``, in the frame
``_storage.wgsl``, run by ``test_wgsl_cases.py``)."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import interp
from kvdsl.emit import emit
from kvdsl.frontend import parse
from kvdsl.interp import OutOfBounds, RaceError
from kvdsl.ir.types import StorageTexture
from kvdsl.runtime import tint_check
from tests.helpers.backends import assert_as_numpy, backend_run
from tests.helpers.textures import BACKENDS, assert_refused_in_words, read_back

N = 128
W, H = 8, 16
HEAD = (
    "@group(0) @binding(0) var<storage, read_write> out: array<f32>;\n"
    "@group(0) @binding(1) var acc: texture_storage_2d<r32float, read_write>;\n"
    "@group(0) @binding(2) var src: texture_storage_2d<rgba32float, read>;\n"
    "@group(0) @binding(3) var ids: texture_storage_2d<r32uint, read>;\n"
)
ENTRY = (
    "@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
    "  let d = textureDimensions(acc);\n  let c = vec2<u32>(gid.x % d.x, gid.x / d.x);\n"
)
TEXT = (
    HEAD
    + "fn bump(t: texture_storage_2d<r32float, read_write>, c: vec2<u32>, by: f32) -> f32 {\n"
    + "  let v = textureLoad(t, c);\n  textureStore(t, c, v * 2.0 + vec4<f32>(by));\n"
    + "  return v.x + v.w * 1000.0;\n}\n"
    + ENTRY
    + "  let s = textureLoad(src, vec2<i32>(c));\n"
    + "  out[gid.x] = bump(acc, c, s.y) + f32(textureLoad(ids, c).x + textureLoad(ids, c).w);\n}\n"
)


def _inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(4407)
    return {
        "out": np.full(N, np.nan, np.float32),
        "acc": rng.uniform(1, 4, (H, W, 1)).astype(np.float32),
        "src": rng.uniform(1, 4, (H, W, 4)).astype(np.float32),
        "ids": rng.integers(1, 99, (H, W, 1), dtype=np.uint32),
    }


def _want() -> dict[str, np.ndarray]:
    t, f = _inputs(), np.float32
    a, s, ids = t["acc"].reshape(-1), t["src"].reshape(-1, 4)[:, 1], t["ids"].reshape(-1)
    out = (a + f(1000)) + (ids + 1).astype(f)  # an r32 texel's w is 1
    return {"out": out, "acc": (a * f(2) + s).reshape(H, W, 1)}


def _run(run, text: str = TEXT) -> dict[str, np.ndarray]:
    return run(parse(text), _inputs(), {}, (N // 64, 1, 1))


@pytest.mark.parametrize("backend", BACKENDS)
def test_read_and_read_write_textures_load_and_store_as_numpy_says(backend, request):
    got = _run(backend_run(backend, request))
    assert sorted(got) == ["acc", "out"]  # a read texture comes back from neither
    for name, want in _want().items():
        np.testing.assert_array_equal(got[name], want, err_msg=name)


def test_the_text_prints_back_and_tint_takes_it_and_its_print():
    # naga (this wgpu) stores through no texture parameter: the GPU path specialises bump.
    k = read_back(TEXT)
    assert tint_check({"text": TEXT, "printed": emit(k)}) == {"text": None, "printed": None}


#: Races: name -> (body, what the race says)
RACES = {
    "a_read_of_a_texel_another_wrote": (
        "  textureStore(acc, c, vec4<f32>(1.0));\n"
        "  out[gid.x] = textureLoad(acc, vec2<u32>((c.x + 1u) % d.x, c.y)).x;",
        r"acc texel \(\d+, \d+\): invocation .* writes it and invocation .* reads it",
    ),
    "a_write_of_a_texel_another_read": (
        "  out[gid.x] = textureLoad(acc, vec2<u32>(0u, 0u)).x;\n"
        "  textureStore(acc, c, vec4<f32>(1.0));",
        r"acc texel \(0, 0\): other invocations read it and invocation .* writes it",
    ),
}


@pytest.mark.parametrize("name", RACES)
def test_an_invocation_reading_a_texel_another_writes_races(name):
    body, words = RACES[name]
    with pytest.raises(RaceError, match=words):
        _run(interp.run, HEAD + ENTRY + body + "\n}\n")


RGBA_READ_WRITE = (
    "@group(0) @binding(0) var<storage, read_write> out: array<f32>;\n"
    "@group(0) @binding(1) var img: texture_storage_2d<rgba32float, read_write>;\n"
    "@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
    "  let c = vec2<u32>(gid.x % 8u, gid.x / 8u);\n  let v = textureLoad(img, c);\n"
    "  textureStore(img, c, v + 1.0);\n  out[gid.x] = v.z;\n}\n"
)


def test_a_read_write_format_webgpu_does_not_bind_is_refused_as_tint_refuses_it():
    ours = "format rgba32float does not support storage texture"
    tints = "does not support storage texture access StorageTextureAccess::ReadWrite"
    assert_refused_in_words("t", RGBA_READ_WRITE, ours, tints)
    unused = RGBA_READ_WRITE.replace("textureLoad(img, c)", "vec4<f32>(1.0)").replace(
        "  textureStore(img, c, v + 1.0);\n", ""
    )
    parse(unused)  # one the entry point does not name: left out of Tint's pipeline
    assert tint_check({"t": unused}) == {"t": None}


#: texture_storage_3d, written and read_write, at vec3 coordinates (u32 and i32), sized by
#: textureDimensions (a vec3<u32>); the workgroups cover the 8 x 4 x 6 texels.
VOLUME = (
    "@group(0) @binding(0) var<storage, read> a: array<u32>;\n"
    "@group(0) @binding(1) var vol: texture_storage_3d<r32uint, write>;\n"
    "@group(0) @binding(2) var acc: texture_storage_3d<r32float, read_write>;\n"
    "@compute @workgroup_size(4, 4, 2)\n"
    "fn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
    "  let d = textureDimensions(vol);\n  let i = gid.x + gid.y * d.x + gid.z * d.x * d.y;\n"
    "  textureStore(vol, gid, vec4<u32>(a[i] * 3u + d.z, 0u, 0u, 0u));\n"
    "  let v = textureLoad(acc, vec3<i32>(gid));\n"
    "  textureStore(acc, gid, v + vec4<f32>(f32(a[i])));\n}\n"
)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_texture_storage_3d_stores_and_loads_as_numpy_says(backend, request):
    rng = np.random.default_rng(4409)
    a = rng.integers(1, 1000, 8 * 4 * 6, dtype=np.uint32)
    acc = rng.uniform(1, 4, (6, 4, 8, 1)).astype(np.float32)  # depth, height, width
    bufs = {"a": a, "vol": np.full((6, 4, 8, 1), 0xDEADBEEF, np.uint32), "acc": acc}
    k = read_back(VOLUME)
    got = backend_run(backend, request)(k, bufs, {}, (2, 1, 3))
    np.testing.assert_array_equal(got["vol"].reshape(-1), a * 3 + 6)
    np.testing.assert_array_equal(got["acc"].reshape(-1), acc.reshape(-1) + a.astype(np.float32))
    assert tint_check({"t": VOLUME}) == {"t": None}


#: The storage formats past the 32-bit ones: format -> (the vec4's element type, its values in
#: the format's range). A texel is stored from a buffer's vec4 into a write texture, and a
#: read texture's texel loaded into a buffer's vec4.
MORE_FORMATS = {
    "rgba8snorm": ("f32", lambda r, n: r.uniform(-1.3, 1.3, (n, 4))),
    "rgba8uint": ("u32", lambda r, n: r.integers(0, 256, (n, 4))),
    "rgba8sint": ("i32", lambda r, n: r.integers(-128, 128, (n, 4))),
    "rgba16uint": ("u32", lambda r, n: r.integers(0, 1 << 16, (n, 4))),
    "rgba16sint": ("i32", lambda r, n: r.integers(-(1 << 15), 1 << 15, (n, 4))),
    "rgba16float": ("f32", lambda r, n: r.standard_normal((n, 4)) * 100),
    "rg32float": ("f32", lambda r, n: r.standard_normal((n, 4))),
    "rg32uint": ("u32", lambda r, n: r.integers(1, 1 << 32, (n, 4))),
    "rg32sint": ("i32", lambda r, n: r.integers(-(1 << 31), 1 << 31, (n, 4))),
}


def _formats_text(fmt: str, elem: str) -> str:
    return (
        f"@group(0) @binding(0) var<storage, read> x: array<vec4<{elem}>>;\n"
        f"@group(0) @binding(1) var<storage, read_write> y: array<vec4<{elem}>>;\n"
        f"@group(0) @binding(2) var dst: texture_storage_2d<{fmt}, write>;\n"
        f"@group(0) @binding(3) var src: texture_storage_2d<{fmt}, read>;\n"
        "@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
        "  let c = vec2<u32>(gid.x % 8u, gid.x / 8u);\n"
        "  textureStore(dst, c, x[gid.x]);\n  y[gid.x] = textureLoad(src, c);\n}\n"
    )


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fmt", MORE_FORMATS)
def test_the_other_storage_formats_store_and_load_as_numpy_says(fmt, backend, request):
    run = backend_run(backend, request)
    elem, values = MORE_FORMATS[fmt]
    ty = StorageTexture(fmt)
    rng = np.random.default_rng(4411)
    dtype = {"f32": np.float32, "u32": np.uint32, "i32": np.int32}[elem]
    x = values(rng, N).astype(dtype)
    src = values(rng, N)[:, : ty.channels]
    if fmt == "rgba8snorm":
        src = np.rint(np.clip(src, -1, 1) * 127)
    src = src.astype(ty.dtype).reshape(H, W, ty.channels)
    bufs = {"x": x, "y": np.full((N, 4), 7, dtype), "src": src}
    bufs["dst"] = np.zeros((H, W, ty.channels), ty.dtype)
    k = parse(_formats_text(fmt, elem))
    got = run(k, bufs, {}, (N // 64, 1, 1))
    stored = x[:, : ty.channels]
    if fmt == "rgba8snorm":
        stored = np.rint(np.clip(stored.astype(np.float64), -1, 1) * 127)
    want = stored.astype(ty.dtype).reshape(H, W, -1)
    if fmt == "rgba16float" and backend == "gpu":
        # An f32 to f16 conversion gives either nearest value (llvmpipe rounds toward zero).
        toward_zero = np.where(
            np.abs(want.astype(np.float32)) > np.abs(stored.reshape(H, W, -1)),
            np.nextafter(want, np.float16(0)),
            want,
        )
        assert np.all((got["dst"] == want) | (got["dst"] == toward_zero))
    else:  # a unorm or snorm code may round the other way on a GPU
        assert_as_numpy(got["dst"], want, backend, codes=True)
    loaded = np.zeros((N, 4), dtype)
    loaded[:, 3] = 1
    loaded[:, : ty.channels] = src.reshape(N, -1)
    if fmt == "rgba8snorm":  # a GPU may round x / 127 in the last place
        want = np.maximum(src.reshape(N, 4).astype(np.float32) / np.float32(127), -1)
        np.testing.assert_allclose(got["y"], want, rtol=2**-23, atol=0)
    else:
        np.testing.assert_array_equal(got["y"], loaded)


def test_an_integer_a_narrow_format_cannot_hold_is_out_of_bounds():
    k = parse(_formats_text("rgba8uint", "u32"))
    x = np.full((N, 4), 300, np.uint32)
    bufs = {"x": x, "y": np.zeros((N, 4), np.uint32), "src": np.zeros((H, W, 4), np.uint8)}
    bufs["dst"] = np.zeros((H, W, 4), np.uint8)
    with pytest.raises(OutOfBounds, match=r"dst texel \(0, 0\): .* stores \[300, 300, 300, 300\]"):
        interp.run(k, bufs, {}, (N // 64, 1, 1))
    assert tint_check({"t": _formats_text("rgba8uint", "u32")}) == {"t": None}


#: textureBarrier(): each invocation reads its own texel, writes it, and, past the barrier, reads
#: the texel of the invocation its workgroup mirrors (local 63 - l): ordered within the
#: workgroup, as WGSL says.
BARRIER = (
    "@group(0) @binding(0) var<storage, read> a: array<f32>;\n"
    "@group(0) @binding(1) var<storage, read_write> out: array<f32>;\n"
    "@group(0) @binding(2) var acc: texture_storage_2d<r32float, read_write>;\n"
    "@compute @workgroup_size(64)\n"
    "fn main(@builtin(global_invocation_id) gid: vec3<u32>,\n"
    "        @builtin(local_invocation_index) l: u32, @builtin(workgroup_id) wid: vec3<u32>) {\n"
    "  let c = vec2<u32>(l, wid.x);\n  let mine = textureLoad(acc, c).x;\n"
    "  textureStore(acc, c, vec4<f32>(mine + a[gid.x]));\n  textureBarrier();\n"
    "  out[gid.x] = textureLoad(acc, vec2<u32>(63u - l, wid.x)).x;\n}\n"
)


def _barrier_run(run, text: str = BARRIER) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(4412)
    bufs = {"a": rng.uniform(1, 4, N).astype(np.float32), "out": np.full(N, np.nan, np.float32)}
    bufs["acc"] = rng.uniform(1, 4, (2, 64, 1)).astype(np.float32)
    return run(parse(text), bufs, {}, (N // 64, 1, 1)), bufs


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_texture_barrier_orders_a_workgroups_texel_accesses(backend, request):
    got, bufs = _barrier_run(backend_run(backend, request))
    new = bufs["acc"].reshape(2, 64) + bufs["a"].reshape(2, 64)
    np.testing.assert_array_equal(got["acc"].reshape(2, 64), new)
    np.testing.assert_array_equal(got["out"].reshape(2, 64), new[:, ::-1])
    k = read_back(BARRIER)
    assert tint_check({"t": BARRIER, "printed": emit(k)}) == {"t": None, "printed": None}


@pytest.mark.parametrize(
    "old, new, words",
    [
        ("  textureBarrier();\n", "", r"acc texel \(\d+, 0\): invocation .* writes it and"),
        ("63u - l, wid.x", "l, 1u - wid.x", r"acc texel \(0, 1\): invocation gid=\(64, 0, 0\)"),
    ],
    ids=["without_the_barrier", "across_workgroups"],
)
def test_texel_accesses_no_texture_barrier_orders_race(old, new, words):
    with pytest.raises(RaceError, match=words):
        _barrier_run(interp.run, BARRIER.replace(old, new))


def test_a_texture_barrier_in_non_uniform_control_flow_is_refused_as_tint_refuses_it():
    text = BARRIER.replace("  textureBarrier();\n", "  if (l > 3u) { textureBarrier(); }\n")
    ours = "textureBarrier() must be reached in uniform"
    assert_refused_in_words("t", text, ours, "must only be called from uniform control flow")
