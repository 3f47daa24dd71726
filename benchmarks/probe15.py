"""Walk design probe 15 (H200): int4 K RMSNorm in workgroup memory, two vectors per invocation.

After probe 14 the workgroup form of ``build_quant_int4_knorm_flat`` stays at 79-80% of the
copy where the subgroup form reaches 95-100%: each invocation moves 48 bytes (16 + 16 read, 8 + 8
written) and then waits at the barrier. *two*: each invocation owns vectors ``h`` and
``h + HEAD_DIM_V4 / 2`` of its row (each load still coalesced across adjacent invocations), so
twice the bytes are in flight per barrier and a row's partials are 16 (four vec4 loads). Its sum
of squares adds the two vectors' dots first, so its bits may differ from the emitted kernel's in
the last ulp, and a rounding tie may move a quantised value: the check reports the share of
equal words. Timed alternately with the emitted kernel and the copy, five rounds, best kept,
after 30 s of copies.
"""

from __future__ import annotations

import math
import sys


import probes
from kvdsl.ir import workgroups
from kvdsl.runtime import run_source

VARIANT = "build_quant_int4_knorm_flat_qwen3_06b"
BODY = """  let e = gid.x + gid.y * 65535u * WG;
  let h = e % HALF_ROW;
  let row = min(e / HALF_ROW, params.count - 1u);
  let t = row % params.seq;
  let tmp = row / params.seq;
  let hk = tmp % KV_HEADS;
  let b = tmp / KV_HEADS;
  let srcBase = (b * params.seq + t) * KV_HIDDEN_V4 + hk * HEAD_DIM_V4;
  let items = params.count * HALF_ROW;
  let k0 = src_k[srcBase + h];
  let k1 = src_k[srcBase + h + HALF_ROW];
  let kW0 = k_norm_weight[h];
  let kW1 = k_norm_weight[h + HALF_ROW];
  let v0 = src_v[srcBase + h];
  let v1 = src_v[srcBase + h + HALF_ROW];
  let dst = ((b * KV_HEADS + hk) * params.seq + t) * HEAD_DIM_V4 + h;
  let pc = params.perChannel != 0u;
  let sBase = select(0u, hk * HEAD_DIM + h * 4u, pc);
  let sStep = select(0u, 1u, pc);
  let sHalf = select(0u, HALF_ROW * 4u, pc);
  let ks0 = vec4<f32>(k_scale[sBase], k_scale[sBase + sStep], k_scale[sBase + sStep * 2u], k_scale[sBase + sStep * 3u]);
  let ks1 = vec4<f32>(k_scale[sBase + sHalf], k_scale[sBase + sHalf + sStep], k_scale[sBase + sHalf + sStep * 2u], k_scale[sBase + sHalf + sStep * 3u]);
  let vs0 = vec4<f32>(v_scale[sBase], v_scale[sBase + sStep], v_scale[sBase + sStep * 2u], v_scale[sBase + sStep * 3u]);
  let vs1 = vec4<f32>(v_scale[sBase + sHalf], v_scale[sBase + sHalf + sStep], v_scale[sBase + sHalf + sStep * 2u], v_scale[sBase + sHalf + sStep * 3u]);
  wsum[lid.x / 4u][lid.x % 4u] = dot(k0, k0) + dot(k1, k1);
  workgroupBarrier();
  let rowQuad = (lid.x - h) / 4u;
  var acc: vec4<f32> = vec4<f32>(0.0f, 0.0f, 0.0f, 0.0f);
  for (var j: u32 = 0u; j < HALF_ROW / 4u; j = j + 1u) {
    acc = acc + wsum[rowQuad + j];
  }
  let ms = acc.x + acc.y + (acc.z + acc.w);
  let invRms = inverseSqrt(ms / f32(HEAD_DIM) + QK_EPS);
  if (e >= items) {
    return;
  }
  let lo = vec4<f32>(QMIN, QMIN, QMIN, QMIN);
  let hi = vec4<f32>(QMAX, QMAX, QMAX, QMAX);
  let off = vec4<i32>(8i, 8i, 8i, 8i);
  let m = vec4<u32>(15u, 15u, 15u, 15u);
  let nk0 = vec4<u32>(vec4<i32>(clamp(round(k0 * invRms * kW0 / ks0), lo, hi)) + off) & m;
  let nk1 = vec4<u32>(vec4<i32>(clamp(round(k1 * invRms * kW1 / ks1), lo, hi)) + off) & m;
  let nv0 = vec4<u32>(vec4<i32>(clamp(round(v0 / vs0), lo, hi)) + off) & m;
  let nv1 = vec4<u32>(vec4<i32>(clamp(round(v1 / vs1), lo, hi)) + off) & m;
  present_key[dst] = vec2<u32>(nk0.x | (nk0.y << 4u), nk0.z | (nk0.w << 4u));
  present_key[dst + HALF_ROW] = vec2<u32>(nk1.x | (nk1.y << 4u), nk1.z | (nk1.w << 4u));
  present_value[dst] = vec2<u32>(nv0.x | (nv0.y << 4u), nv0.z | (nv0.w << 4u));
  present_value[dst + HALF_ROW] = vec2<u32>(nv1.x | (nv1.y << 4u), nv1.z | (nv1.w << 4u));
}
"""


def two(text: str) -> str:
    """The emitted kernel with :data:`BODY` (two vectors per invocation)."""
    head = text[: text.index("  let e = gid.x")]
    head = head.replace(
        "const HEAD_DIM_V4: u32 = 32u;", "const HEAD_DIM_V4: u32 = 32u;\nconst HALF_ROW: u32 = 16u;"
    )
    assert "HALF_ROW: u32 = 16u" in head
    return head + BODY


def main() -> None:
    size, pool, race = probes.start(sys.argv)
    for m in probes.measurements([VARIANT], size, pool):
        if "Pair walk" in m.text:
            print(f"{VARIANT} is emitted on the pair walk now; probe15.txt is this probe's record")
            return
        for per_channel in (1, 0):
            params = m.params | {"perChannel": per_channel}
            wg = workgroups(m.kernel, params)
            assert wg[1] == wg[2] == 1
            forms = {"emitted": (m.text, wg), "two": (two(m.text), (math.ceil(wg[0] / 2), 1, 1))}
            outs = [
                run_source(t, m.kernel.bindings, m.kernel.params, dict(m.bufs), params, w)
                for t, w in forms.values()
            ]
            label = f"{m.label} perChannel={per_channel}"
            for b in outs[0]:
                eq = outs[0][b] == outs[1][b]
                print(f"{label} {b}: {100 * eq.mean():.4f}% of words equal", flush=True)
                assert eq.mean() > 0.999
            race.run(label, m.kernel, forms, m.bufs, params, m.nbytes, 5)


if __name__ == "__main__":
    main()
