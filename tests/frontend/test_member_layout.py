"""``@align(n)`` and ``@size(n)`` on struct members, as WebGPU runtimes pad their uniforms and
storage records: each member at the next multiple of its own ``@align`` (else its type's
alignment), taking ``@size`` bytes (else its type's size); the struct's alignment the largest of
its members'. The host packs the uniform at those offsets, the interpreter reads storage words
at them, and each kernel runs on both backends as numpy says; a layout at WGSL's default
offsets would read other words and fail."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import interp, runtime
from kvdsl.emit import emit
from kvdsl.frontend import WgslTypeError, parse
from kvdsl.ir.types import field_offsets, size_of
from kvdsl.runtime.layout import pack_params, params_layout
from tests.helpers.wgsl import assert_refused_as_tint_refuses, assert_tint_takes

N = 96

PADDED = """struct Params {
  n: u32,
  @align(16) scale: f32,
  @size(12) shift: f32,
  bias: f32,
  @align(32) @size(20) step: u32,
}

struct Rec {
  x: f32,
  @align(16) y: vec2<f32>,
  @size(8) z: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> recs: array<Rec>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(32)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if i >= params.n {
    return;
  }
  let r = recs[i];
  out[i] = (r.x + r.y.x * r.y.y) * params.scale + params.shift * f32(r.z)
    + params.bias * f32(params.step);
}
"""


def _recs(rng) -> tuple[np.ndarray, dict]:
    """The records as the host's u32 words, 8 a record: x at word 0, y at words 4 and 5 (its
    @align(16)), z at word 6 (@size(8) ends the record at word 8)."""
    x = rng.uniform(0.5, 2.0, N).astype(np.float32)
    y = rng.uniform(-2.0, 2.0, (N, 2)).astype(np.float32)
    z = rng.integers(1, 50, N).astype(np.uint32)
    words = np.full((N, 8), 0xDEADBEEF, np.uint32)  # the padding: values no member reads
    words[:, 0] = x.view(np.uint32)
    words[:, 4:6] = y.view(np.uint32)
    words[:, 6] = z
    return words.reshape(-1), {"x": x, "y": y, "z": z}


def test_members_sit_where_align_and_size_put_them():
    k = parse(PADDED, "padded.wgsl")
    rec = k.binding("recs").elem
    assert field_offsets(rec) == (0, 16, 24)
    assert size_of(rec) == 32
    offsets, size = params_layout(k.params)
    assert offsets == {"n": 0, "scale": 16, "shift": 20, "bias": 32, "step": 64}
    assert size == 96  # step ends at 84; the struct's alignment is 32
    words = np.frombuffer(
        pack_params(k.params, {"n": 7, "scale": 1.5, "shift": -2.0, "bias": 0.25, "step": 9}),
        np.uint32,
    )
    assert words[0] == 7 and words[16] == 9
    assert words[4:6].view(np.float32).tolist() == [1.5, -2.0]
    assert words[8].view(np.float32) == np.float32(0.25)
    assert "  @align(32) @size(20) step: u32," in emit(k)
    assert parse(emit(k), "padded.wgsl") == k


def test_a_padded_uniform_and_storage_records_run_as_numpy_says(gpu):
    rng = np.random.default_rng(45)
    words, r = _recs(rng)
    p = {
        "n": 80,
        "scale": float(rng.uniform(0.5, 2.0)),
        "shift": float(rng.uniform(-1.0, 1.0)),
        "bias": float(rng.uniform(0.1, 1.0)),
        "step": int(rng.integers(2, 9)),
    }
    f = np.float32
    want = (r["x"] + r["y"][:, 0] * r["y"][:, 1]) * f(p["scale"]) + f(p["shift"]) * r["z"].astype(f)
    want = (want + f(p["bias"]) * f(p["step"])).astype(f)
    want[p["n"] :] = np.nan
    k = parse(PADDED, "padded.wgsl")
    for run in (interp.run, runtime.run):
        bufs = {"recs": words, "out": np.full(N, np.nan, np.float32)}
        got = run(k, bufs, p, (3, 1, 1))["out"]
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=run.__module__)
    assert_tint_takes({"padded": PADDED})


def _one(member: str) -> str:
    return (
        f"struct P {{ a: u32, {member} }}\n"
        "@group(0) @binding(0) var<storage, read_write> out: array<P>;\n"
        "@compute @workgroup_size(64)\n"
        "fn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
        "  out[gid.x].a = 1u;\n"
        "}\n"
    )


@pytest.mark.parametrize(
    "member, message",
    [
        ("@align(3) b: u32", r"member b: @align\(3\) .* power of two"),
        ("@align(4) b: vec2<f32>", r"member b: @align\(4\) .* multiple of vec2<f32>'s"),
        ("@size(8) b: vec4<f32>", r"member b: @size\(8\) .* at least vec4<f32>'s size, 16"),
    ],
)
def test_an_alignment_or_size_wgsl_refuses_is_refused_as_tint_refuses_it(member, message):
    assert_refused_as_tint_refuses(_one(member), WgslTypeError, message)
