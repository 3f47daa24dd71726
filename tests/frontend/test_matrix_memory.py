"""Matrices of f32 in memory, in WGSL's layout: each column a ``vecR`` at its vector's alignment
(``mat3x3<f32>``'s columns 16 bytes apart, 48 bytes in all), a matrix's alignment its column's.
A storage binding of matrices (``array<mat3x3<f32>>``, held padding included as ``float32``),
structs with matrix members (``u32`` words in that layout), a workgroup array of matrices, and
matrices among the uniform's params fields (packed by the host). Each kernel runs in the
interpreter and on the GPU as numpy says, from the host's bytes (padding words poisoned on the
way in, and left as they were on the way out)."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import interp, runtime
from kvdsl.emit import emit
from kvdsl.frontend import FrontendError, parse
from kvdsl.ir import f16, f32, mat
from kvdsl.ir.tree import Struct
from kvdsl.ir.types import field_offsets, size_of, stride
from kvdsl.runtime.layout import pack_params, params_layout
from tests.helpers.wgsl import assert_refused_as_tint_refuses, assert_tint_takes
from tests.helpers.backends import backend_run

N = 128
POISON = np.float32(np.nan).view(np.uint32)

KERNEL = """struct Xf {
  m: mat3x3<f32>,
  s: f32,
  t: mat2x4<f32>,
}

struct Params {
  n: u32,
  rot: mat3x3<f32>,
  scale: f32,
  shift: mat2x4<f32>,
  tiny: mat2x2<f32>,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> mats: array<mat3x3<f32>>;
@group(0) @binding(2) var<storage, read> xs: array<Xf>;
@group(0) @binding(3) var<storage, read_write> out: array<mat3x3<f32>>;
@group(0) @binding(4) var<storage, read_write> outx: array<Xf>;
var<workgroup> tile: array<mat2x2<f32>, 64>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let i = gid.x;
  let a = mats[i];
  let x = xs[i];
  tile[lid.x] = mat2x2<f32>(a[0].xy, a[1].yz);
  tile[lid.x][1][1] += params.tiny[1][0];
  workgroupBarrier();
  let w = tile[(lid.x + 1u) % 64u];
  out[i] = params.rot * a * x.m * params.scale;
  out[i][2][1] = w[1][1] + xs[i].t[1].w;
  var y = x;
  y.t = transpose(mat4x2<f32>(w[0], w[1], a[2].xy, vec2<f32>(x.s, 1.0))) + params.shift;
  y.m[0] = a[2];
  outx[i] = y;
  outx[i].s = determinant(a) + f32(params.n);
}
"""

XF = Struct("Xf", (("m", mat(3, 3, f32)), ("s", f32), ("t", mat(2, 4, f32))))


def test_the_layout_is_wgsl():
    assert (mat(3, 3, f32).size, mat(3, 3, f32).align) == (48, 16)
    assert (mat(2, 3, f32).size, mat(4, 2, f32).size, mat(2, 2, f32).align) == (32, 32, 8)
    assert field_offsets(XF) == (0, 48, 64) and size_of(XF) == stride(XF) == 96
    offsets, size = params_layout(parse(KERNEL).params)
    assert offsets == {"n": 0, "rot": 16, "scale": 64, "shift": 80, "tiny": 112} and size == 128


def _columns(words: np.ndarray, at: int, c: int, r: int, step: int) -> np.ndarray:
    """numpy's ``r x c`` matrix of the columns at word ``at``, ``step`` words apart."""
    cols = [words[..., at + k * step : at + k * step + r] for k in range(c)]
    return np.stack(cols, axis=-1).astype(np.float64)


def _inputs() -> tuple[dict, dict]:
    rng = np.random.default_rng(45)
    signs = rng.choice([-1.0, 1.0], (N, 24))
    mats = (rng.uniform(0.5, 1.5, (N, 12)) * signs[:, :12]).astype(np.float32)
    mats[:, 3::4] = np.nan  # the padding word after each column: never read
    xs = (rng.uniform(0.5, 1.5, (N, 24)) * signs).astype(np.float32)
    xs[:, [3, 7, 11, 13, 14, 15]] = np.nan  # padding: after m's columns, and after s
    params = {
        "n": 1000,
        "rot": rng.uniform(0.5, 1.5, (3, 3)).tolist(),
        "scale": 0.75,
        "shift": rng.uniform(0.5, 1.5, (2, 4)).tolist(),
        "tiny": rng.uniform(0.5, 1.5, (2, 2)).tolist(),
    }
    bufs = {
        "mats": mats,
        "xs": xs.view(np.uint32),
        "out": np.full((N, 12), np.nan, np.float32),
        "outx": np.full((N, 24), POISON, np.uint32),
    }
    return bufs, params


def numpy_kernel(bufs: dict, params: dict) -> dict:
    """What KERNEL leaves in ``out`` and ``outx`` (as float64; padding words NaN, as poisoned)."""
    a = _columns(bufs["mats"], 0, 3, 3, 4)
    xs = bufs["xs"].view(np.float32)
    xm, xs_s, xt = _columns(xs, 0, 3, 3, 4), xs[:, 12].astype(np.float64), _columns(xs, 16, 2, 4, 4)
    rot = np.asarray(params["rot"]).T  # the host gives columns
    shift, tiny = np.asarray(params["shift"]).T, np.asarray(params["tiny"]).T
    tile = np.stack([a[:, :2, 0], a[:, 1:, 1]], axis=-1)
    tile[:, 1, 1] += tiny[0, 1]
    w = tile.reshape(N // 64, 64, 2, 2)[:, (np.arange(64) + 1) % 64].reshape(N, 2, 2)
    m = rot @ a @ xm * params["scale"]
    m[:, 1, 2] = w[:, 1, 1] + xt[:, 3, 1]
    out = np.full((N, 12), np.nan)
    for k in range(3):
        out[:, 4 * k : 4 * k + 3] = m[:, :, k]
    t = np.stack([w[:, :, 0], w[:, :, 1], a[:, :2, 2], np.stack([xs_s, np.ones(N)], 1)], -1)
    yt = np.swapaxes(t, 1, 2) + shift
    outx = np.full((N, 24), np.nan)
    outx[:, 0:3] = a[:, :, 2]
    outx[:, 4:7], outx[:, 8:11] = xm[:, :, 1], xm[:, :, 2]
    outx[:, 12] = np.linalg.det(a) + params["n"]
    outx[:, 16:20], outx[:, 20:24] = yt[:, :, 0], yt[:, :, 1]
    return {"out": out, "outx": outx}


def _check(got: dict, want: dict) -> None:
    for name, w in want.items():
        g = got[name]
        g = (g.view(np.float32) if g.dtype == np.uint32 else g).astype(np.float64)
        assert np.array_equal(np.isnan(g), np.isnan(w)), f"{name}: padding or coverage differs"
        if name == "outx":  # the padding words are the poison, bit for bit
            pad = np.isnan(w)
            assert (got[name].reshape(N, 24)[pad] == POISON).all()
        ok = ~np.isnan(w)
        err = np.abs(g[ok] - w[ok]) / (1 + np.abs(w[ok]))
        assert err.max() <= 2e-6, f"{name}: worst {err.max():.3g}"


def test_matrices_in_memory_print_back_to_the_same_ir():
    k = parse(KERNEL)
    assert parse(emit(k)) == k


def test_params_pack_each_column_at_its_alignment():
    k = parse(KERNEL)
    _, params = _inputs()
    raw = np.frombuffer(pack_params(k.params, params), np.float32)
    rot = np.asarray(params["rot"], np.float32)
    np.testing.assert_array_equal(raw[4:16].reshape(3, 4)[:, :3], rot)
    np.testing.assert_array_equal(raw[28:30], np.asarray(params["tiny"], np.float32)[0])


def test_matrices_in_memory_in_the_interpreter_are_what_numpy_says():
    bufs, params = _inputs()
    got = interp.run(parse(KERNEL), bufs, params, (N // 64, 1, 1))
    _check(got, numpy_kernel(bufs, params))


def test_matrices_in_memory_on_the_gpu_are_what_numpy_says(gpu):
    bufs, params = _inputs()
    got = runtime.run(parse(KERNEL), bufs, params, (N // 64, 1, 1))
    _check(got, numpy_kernel(bufs, params))


def test_a_race_on_a_matrix_column_names_it():
    racy = KERNEL.replace("out[i][2][1] = w[1][1]", "out[i / 2u][2][1] = w[1][1]")
    bufs, params = _inputs()
    with pytest.raises(interp.InterpError, match=r"out\[\d+\]\[2\]\.y"):
        interp.run(parse(racy), bufs, params, (N // 64, 1, 1))


def test_tint_takes_the_kernel():
    assert_tint_takes({"kernel": KERNEL})


HALF_PARAMS = """enable f16;
struct Params {
  h: f16,
  rot: mat3x3<f16>,
  k: mat2x2<f16>,
}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> out: array<vec4<f32>>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let v = vec4<f16>(x[gid.x]);
  let r = params.rot * v.xyz * params.h;
  out[gid.x] = vec4<f32>(vec3<f32>(r), f32((params.k * v.zw).y));
}
"""


def test_f16_matrices_in_the_uniform_run_as_numpy_says(gpu):
    k = parse(HALF_PARAMS)
    offsets, size = params_layout(k.params)
    assert offsets == {"h": 0, "rot": 8, "k": 32} and size == 48  # columns 8 bytes apart
    rng = np.random.default_rng(46)
    x = (rng.uniform(0.5, 1.5, (N, 4)) * rng.choice([-1, 1], (N, 4))).astype(np.float32)
    params = {"h": 0.5, "rot": rng.uniform(0.5, 1.5, (3, 3)).tolist(), "k": [[1, 2], [3, 4]]}
    rot, km = np.asarray(params["rot"]).T, np.asarray(params["k"]).T
    v = x.astype(np.float16).astype(np.float64)
    want = np.concatenate([v[:, :3] @ rot.T * 0.5, (v[:, 2:] @ km.T)[:, 1:]], axis=1)
    for run in (interp.run, runtime.run):
        got = run(k, {"x": x, "out": np.full((N, 4), np.nan, np.float32)}, params, (2, 1, 1))
        err = np.abs(got["out"] - want) / (1 + np.abs(want))
        assert err.max() <= 1e-2, f"{run.__module__}: worst {err.max():.3g}"


# ---- f16 matrices in memory, conversions and module consts -----------------------------------

HALF_MEMORY = """enable f16;

struct Frame {
  m: mat3x3<f16>,
  s: f16,
  t: mat2x2<f16>,
}

const K = mat2x2<f32>(0.5, -1.0, 1.5, 2.0);
const KH = mat2x2<f16>(K);
const LIFT = vec2<f32>(0.25, -0.75);

@group(0) @binding(0) var<storage, read> mats: array<mat2x3<f16>>;
@group(0) @binding(1) var<storage, read> frames: array<Frame>;
@group(0) @binding(2) var<storage, read_write> out: array<mat2x2<f32>>;
@group(0) @binding(3) var<storage, read_write> outf: array<Frame>;
var<workgroup> tile: array<mat3x2<f16>, 64>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let i = gid.x;
  let a = mats[i];
  tile[lid.x] = transpose(a);
  tile[lid.x][2][0] = frames[i].s;
  workgroupBarrier();
  let w = tile[(lid.x + 1u) % 64u];
  out[i] = mat2x2<f32>(frames[i].t * KH) + K * f32(w[2][0]);
  out[i][1] += LIFT;
  var f = frames[i];
  f.m[1] = a[0];
  f.t = mat2x2<f16>(w[0], w[1]);
  f.s = determinant(frames[i].t);
  outf[i] = f;
}
"""

#: Frame's halves: m's columns at 0, 4, 8 (three each, then a padding half), s at 12, t's
#: columns at 14 and 16, padding to 20 (the struct aligns to 8).
FRAME_PAD = [3, 7, 11, 13, 18, 19]


def test_f16_matrices_take_wgsl_layout():
    k = parse(HALF_MEMORY)
    frame = k.binding("frames").elem
    assert field_offsets(frame) == (0, 24, 28) and size_of(frame) == stride(frame) == 40
    assert (mat(2, 3, f16).size, mat(3, 2, f16).size, mat(2, 3, f16).align) == (16, 12, 8)
    assert parse(emit(k)) == k


def _half_matrix_inputs() -> dict:
    rng = np.random.default_rng(47)
    mats = (rng.uniform(0.5, 1.5, (N, 8)) * rng.choice([-1, 1], (N, 8))).astype(np.float16)
    mats[:, [3, 7]] = np.nan  # the padding half after each vec3<f16> column
    frames = (rng.uniform(0.5, 1.5, (N, 20)) * rng.choice([-1, 1], (N, 20))).astype(np.float16)
    frames[:, FRAME_PAD] = np.nan
    return {
        "mats": mats,
        "frames": frames,
        "out": np.full((N, 4), np.nan, np.float32),
        "outf": np.full((N, 20), np.nan, np.float16),
    }


def numpy_half_matrices(bufs: dict) -> dict:
    """What HALF_MEMORY leaves in ``out`` and ``outf`` (as float64; padding NaN, as poisoned)."""
    a = _columns(bufs["mats"], 0, 2, 3, 4)  # 3 x 2
    fr = bufs["frames"]
    t, s = _columns(fr, 14, 2, 2, 2), fr[:, 12].astype(np.float64)
    k = np.array([[0.5, 1.5], [-1.0, 2.0]])
    tile = np.swapaxes(a, 1, 2).copy()  # 2 x 3: transpose(a)
    tile[:, 0, 2] = s
    w = tile.reshape(N // 64, 64, 2, 3)[:, (np.arange(64) + 1) % 64].reshape(N, 2, 3)
    m = t @ k + k * w[:, 0, 2][:, None, None]
    m[:, :, 1] += [0.25, -0.75]
    out = np.stack([m[:, :, 0], m[:, :, 1]], axis=1).reshape(N, 4)
    outf = fr.astype(np.float64)
    outf[:, 4:7] = a[:, :, 0]
    outf[:, 12] = np.linalg.det(t)
    outf[:, 14:16], outf[:, 16:18] = w[:, :, 0], w[:, :, 1]
    return {"out": out, "outf": outf}


@pytest.mark.parametrize("backend", ["interp", "gpu"])
def test_f16_matrices_in_memory_run_as_numpy_says(backend, request):
    run = backend_run(backend, request)
    bufs = _half_matrix_inputs()
    got = run(parse(HALF_MEMORY), bufs, None, (N // 64, 1, 1))
    for name, w in numpy_half_matrices(bufs).items():
        g = np.asarray(got[name]).reshape(w.shape).astype(np.float64)
        assert np.array_equal(np.isnan(g), np.isnan(w)), f"{name}: padding or coverage differs"
        ok = ~np.isnan(w)
        err = np.abs(g[ok] - w[ok]) / (1 + np.abs(w[ok]))
        assert err.max() <= 1e-2, f"{name}: worst {err.max():.3g}"


def test_a_race_on_an_f16_matrix_names_the_column_and_row():
    racy = HALF_MEMORY.replace("outf[i] = f;", "outf[i] = f;\n  outf[i / 2u].t[1][1] = 1.0h;")
    with pytest.raises(interp.InterpError, match=r"outf\[\d+\] \(half 17 of the struct\)"):
        interp.run(parse(racy), _half_matrix_inputs(), None, (N // 64, 1, 1))
    racy = HALF_MEMORY.replace("tile[lid.x][2][0] = frames[i].s;", "tile[0][2][1] = 1.0h;")
    with pytest.raises(interp.InterpError, match=r"tile\[0\]\[2\]\.y"):
        interp.run(parse(racy), _half_matrix_inputs(), None, (N // 64, 1, 1))


def test_a_constant_f16_matrix_too_small_for_its_value_is_refused():
    bad = HALF_MEMORY.replace("const KH = mat2x2<f16>(K);", "const KH = mat2x2<f16>(K * 1e5);")
    assert_refused_as_tint_refuses(bad, FrontendError, "not finite in f16")


def test_tint_takes_the_f16_kernel():
    assert_tint_takes({"kernel": HALF_MEMORY})


ONLY_TILE = """enable f16;
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
var<workgroup> tile: array<mat2x2<T>, 64>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let v = T(x[gid.x]);
  tile[lid.x] = mat2x2<T>(v, 2.0, -v, 0.5);
  workgroupBarrier();
  let m = tile[(lid.x + 1u) % 64u];
  out[gid.x] = f32(m[1][0] * m[0][1]);
}
"""


@pytest.mark.parametrize("elem", ["f32", "f16"])
def test_a_workgroup_array_of_matrices_alone_runs_as_numpy_says(elem, gpu):
    # no binding held as words: the workgroup array alone makes the kernel reach memory by words
    k = parse(ONLY_TILE.replace("<T>", f"<{elem}>").replace("T(", f"{elem}("))
    x = np.random.default_rng(48).uniform(0.5, 2.0, N) * np.repeat([1, -1], N // 2)
    x = x.astype(np.float32)
    v = x.astype(np.float16 if elem == "f16" else np.float32)
    j = np.arange(N) // 64 * 64 + (np.arange(N) + 1) % 64
    want = (-v[j] * v.dtype.type(2.0)).astype(np.float32)
    for run in (interp.run, runtime.run):
        got = run(k, {"x": x, "out": np.full(N, np.nan, np.float32)}, None, (N // 64, 1, 1))
        np.testing.assert_array_equal(got["out"], want, err_msg=run.__module__)
