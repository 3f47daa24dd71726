"""Probe 31 (H200): the int8 K RMSNorm drop-in with the next step's loads issued a step early.

Runs 34-37 measured ``build_quant_int8_knorm_qwen3_06b`` and ``append_quant_int8_knorm`` at
77-80% of the copy beside them under wgpu-native at 2,048 tokens (batch 4), where the flat
walk runs the same program at 93% and Dawn runs the drop-in at 89-98%. The block walk's four
steps each load, wait at the barrier, reduce, quantise and store; the next step's loads leave
only after the step's second barrier. Fewer lanes (probe 27), two workgroup-memory slots
(probe 30) and a written-out sum (probe 29) did not move it. This races the emitted kernel
against a hand-written *prefetch* form of it: the loads of step ``s + 1`` (K, V, the norm
weights, the scales) are issued into registers before step ``s``'s barrier, so their latency
overlaps the wait; the arithmetic and the order of every sum are the emitted kernel's, so the
bytes written must be the same (checked on the device). Three rounds, best kept, after 20 s of
copies, at batch 4.

Result (``results/h200/probe31.txt``, ``probe31-dawn.txt``): the same bytes, and slower under
both implementations: wgpu-native 76% → 73% of the copy at 2,048 tokens and 91% → 78% at 8,192;
Dawn 88% → 78% and 92% → 81%. Holding two steps' loads in registers costs more than the wait it
hides. The emitted kernel stays.

    python benchmarks/probe31.py [--small]
"""

from __future__ import annotations

import sys

import probes
from kvdsl.runtime import adapter_info

VARIANTS = ["build_quant_int8_knorm_qwen3_06b"]

PREFETCH = """
struct Loaded {
  x0: vec4<f32>, x1: vec4<f32>, w0: vec4<f32>, w1: vec4<f32>, v0: vec4<f32>, v1: vec4<f32>,
  ks0: vec4<f32>, ks1: vec4<f32>, vs0: vec4<f32>, vs1: vec4<f32>,
}

fn load(e: u32) -> Loaded {
  let dr = e % HALF_V4;
  let row = min(e / HALF_V4, params.count - 1u);
  let t = row % params.seq;
  let tmp = row / params.seq;
  let hk = tmp % KV_HEADS;
  let b = tmp / KV_HEADS;
  let srcBase = (b * params.seq + t) * KV_HIDDEN_V4 + hk * HEAD_DIM_V4;
  let s0Base = select(0u, hk * HEAD_DIM + dr * 4u, params.perChannel != 0u);
  let sStep = select(0u, 1u, params.perChannel != 0u);
  let s1Base = select(0u, hk * HEAD_DIM + (dr + HALF_V4) * 4u, params.perChannel != 0u);
  return Loaded(
    src_k[srcBase + dr], src_k[srcBase + (dr + HALF_V4)],
    k_norm_weight[dr], k_norm_weight[dr + HALF_V4],
    src_v[srcBase + dr], src_v[srcBase + (dr + HALF_V4)],
    vec4<f32>(k_scale[s0Base], k_scale[s0Base + sStep * 1u], k_scale[s0Base + sStep * 2u], k_scale[s0Base + sStep * 3u]),
    vec4<f32>(k_scale[s1Base], k_scale[s1Base + sStep * 1u], k_scale[s1Base + sStep * 2u], k_scale[s1Base + sStep * 3u]),
    vec4<f32>(v_scale[s0Base], v_scale[s0Base + sStep * 1u], v_scale[s0Base + sStep * 2u], v_scale[s0Base + sStep * 3u]),
    vec4<f32>(v_scale[s1Base], v_scale[s1Base + sStep * 1u], v_scale[s1Base + sStep * 2u], v_scale[s1Base + sStep * 3u]),
  );
}

@compute @workgroup_size(LANES)
fn main(
  @builtin(local_invocation_id) lid: vec3<u32>,
  @builtin(workgroup_id) wid: vec3<u32>,
) {
  let wgFlat = wid.x + wid.y * 65535u;
  let itemBase = wgFlat * (WG * HALF_V4);
  let items = params.count * HALF_V4;
  var next = load(itemBase + lid.x);
  for (var s: u32 = 0u; s < WG * HALF_V4 / LANES; s = s + 1u) {
    let e = itemBase + lid.x + s * LANES;
    let cur = next;
    if (s + 1u < WG * HALF_V4 / LANES) {
      next = load(e + LANES);
    }
    let dr = e % HALF_V4;
    let row = min(e / HALF_V4, params.count - 1u);
    let t = row % params.seq;
    let tmp = row / params.seq;
    let hk = tmp % KV_HEADS;
    let b = tmp / KV_HEADS;
    let dst = ((b * KV_HEADS + hk) * params.seq + t) * HEAD_DIM_V4 + dr;
    wsum[lid.x / 4u][lid.x % 4u] = dot(cur.x0, cur.x0) + dot(cur.x1, cur.x1);
    workgroupBarrier();
    let rowQuad = (lid.x - dr) / 4u;
    var acc: vec4<f32> = vec4<f32>(0.0f, 0.0f, 0.0f, 0.0f);
    for (var j: u32 = 0u; j < HALF_V4 / 4u; j = j + 1u) {
      acc = acc + wsum[rowQuad + j];
    }
    let ms = acc.x + acc.y + (acc.z + acc.w);
    let invRms = inverseSqrt(ms / f32(HEAD_DIM) + QK_EPS);
    if (!(e >= items)) {
      let x0 = cur.x0 * invRms * cur.w0;
      let x1 = cur.x1 * invRms * cur.w1;
      let qk0 = vec4<i32>(clamp(round(x0 / cur.ks0), vec4<f32>(QMIN, QMIN, QMIN, QMIN), vec4<f32>(QMAX, QMAX, QMAX, QMAX)));
      let qv0 = vec4<i32>(clamp(round(cur.v0 / cur.vs0), vec4<f32>(QMIN, QMIN, QMIN, QMIN), vec4<f32>(QMAX, QMAX, QMAX, QMAX)));
      present_key[dst] = qk0;
      present_value[dst] = qv0;
      let qk1 = vec4<i32>(clamp(round(x1 / cur.ks1), vec4<f32>(QMIN, QMIN, QMIN, QMIN), vec4<f32>(QMAX, QMAX, QMAX, QMAX)));
      let qv1 = vec4<i32>(clamp(round(cur.v1 / cur.vs1), vec4<f32>(QMIN, QMIN, QMIN, QMIN), vec4<f32>(QMAX, QMAX, QMAX, QMAX)));
      present_key[dst + HALF_V4] = qk1;
      present_value[dst + HALF_V4] = qv1;
    }
    workgroupBarrier();
  }
}
"""


def prefetch_form(text: str) -> str:
    """The emitted kernel's declarations (bindings, params, consts) with :data:`PREFETCH`'s
    entry point in place of its own."""
    head = text[: text.index("@compute")]
    return head + PREFETCH.lstrip("\n")


def main(argv: list[str]) -> None:
    size, pool, race = probes.start(argv, 0 if "--small" in argv else 20)
    print(f"{adapter_info()['implementation']}: {adapter_info()['device']}")
    for m in probes.measurements(VARIANTS, size, pool):
        pre = prefetch_form(m.text)
        probes.same_bytes(m, m.text, pre)
        forms = {"emitted": (m.text, m.wg), "prefetch": (pre, m.wg)}
        race.run(m.label, m.kernel, forms, m.bufs, m.params, m.nbytes, 3)


if __name__ == "__main__":
    main(sys.argv[1:])
