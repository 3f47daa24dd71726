"""Walk design probe 13 (H200): f16 rotary as eight halves per invocation through u32 words.

Probes 11 and 12: the flat f16 rotary appends stay at 82-89% of the copy whatever the load order
or the tables, and at 89-90% even unrotated, where f16 *moves* went from 89-93% to 99-100% once
they carried eight halves per invocation as one ``vec4<u32>`` (probe 7). Rotation computes on
the values, so the *words* form here (hand-written for
``merge_share_append_rotary_flat_f16_llama31_8b``) unpacks them: ``unpack2x16float`` on each
u32 gives two f32 lanes, the rotation runs in f32 as before on two ``vec4<f32>`` halves with two
cos/sin ``vec4`` each, and ``pack2x16float`` packs the result. Bindings become
``array<vec4<u32>>`` (the same bytes), and the module needs no ``enable f16;``. The form is
first checked on the device to write the bytes the emitted kernel writes, then timed
alternately with it (five rounds, best kept) beside the copy, after 30 s of copies.
"""

from __future__ import annotations

import math
import sys

import numpy as np

import probes
from kvdsl import catalog
from kvdsl.emit import emit
from kvdsl.ir import workgroups
from kvdsl.runtime import run_source
from plans import Pool, element_sizes, plans, reshape

VARIANT = "merge_share_append_rotary_flat_f16_llama31_8b"
WORDS = """struct Params {
  count: u32,
  seq: u32,
  keySeq: u32,
}

@group(0) @binding(0) var<storage, read> new_k: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> new_v: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> seqlens_k: array<i32>;
@group(0) @binding(3) var<storage, read> cos_cache: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> sin_cache: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> present_key: array<vec4<u32>>;
@group(0) @binding(6) var<storage, read_write> present_value: array<vec4<u32>>;
@group(0) @binding(7) var<uniform> params: Params;

const KV_HEADS: u32 = 8u;
const WG: u32 = 256u;
const HEAD_DIM_V8: u32 = 16u;
const KV_HIDDEN_V8: u32 = 128u;
const HALF_V8: u32 = 8u;
const HALF_V4: u32 = 16u;

fn halves(w: vec2<u32>) -> vec4<f32> {
  return vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y));
}

fn packed(x: vec4<f32>) -> vec2<u32> {
  return vec2<u32>(pack2x16float(x.xy), pack2x16float(x.zw));
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let e = gid.x + gid.y * 65535u * WG;
  if (e >= params.count * HEAD_DIM_V8) {
    return;
  }
  let d8 = e % HEAD_DIM_V8;
  let row = e / HEAD_DIM_V8;
  let j = row % params.keySeq;
  let tmp = row / params.keySeq;
  let hk = tmp % KV_HEADS;
  let b = tmp / KV_HEADS;
  let total = u32(max(seqlens_k[b], -1i)) + 1u;
  let activeEnd = min(params.seq, max(params.keySeq, total));
  let fresh = min(params.keySeq, activeEnd);
  let appendStart = activeEnd - fresh;
  let skip = params.keySeq - fresh;
  if (j < skip) {
    return;
  }
  let t = appendStart + (j - skip);
  let dst = ((b * KV_HEADS + hk) * params.seq + t) * HEAD_DIM_V8 + d8;
  let nSrc = (b * params.keySeq + j) * KV_HIDDEN_V8 + hk * HEAD_DIM_V8;
  let dr = d8 % HALF_V8;
  let w0 = new_k[nSrc + dr];
  let w1 = new_k[nSrc + (dr + HALF_V8)];
  let lo = d8 < HALF_V8;
  var out: vec4<u32>;
  for (var i: u32 = 0u; i < 2u; i = i + 1u) {
    let cs = cos_cache[t * HALF_V4 + 2u * dr + i];
    let sn = sin_cache[t * HALF_V4 + 2u * dr + i];
    let x0 = select(halves(w0.zw), halves(w0.xy), i == 0u);
    let x1 = select(halves(w1.zw), halves(w1.xy), i == 0u);
    let k = packed(select(x1 * cs + x0 * sn, x0 * cs - x1 * sn, lo));
    if (i == 0u) {
      out.x = k.x;
      out.y = k.y;
    } else {
      out.z = k.x;
      out.w = k.y;
    }
  }
  present_key[dst] = out;
  present_value[dst] = new_v[nSrc + d8];
}
"""


def main() -> None:
    size = probes.sizes(sys.argv)
    if "--small" not in sys.argv:
        probes.settle(30.0)
    pool, race = Pool(), probes.Race()
    cfg = reshape(catalog.config(VARIANT))
    kernel = catalog.build_config(cfg, VARIANT)
    text = emit(kernel)
    assert "HEAD_DIM_V4: u32 = 32u" in text, "the probe's words kernel is for head dim 128"
    z = element_sizes(kernel)
    for plan in plans(cfg, size):
        bufs = pool.buffers(kernel.bindings, plan)
        params = plan.params_of(kernel.params)
        wg = workgroups(kernel, params)
        assert wg[1] == wg[2] == 1
        forms = {"vec4<f16>": (text, wg), "words": (WORDS, (math.ceil(wg[0] / 2), 1, 1))}
        outs = [
            run_source(t, kernel.bindings, kernel.params, dict(bufs), params, w)
            for t, w in forms.values()
        ]
        for b in outs[0]:
            same = outs[0][b].view(np.uint16) == outs[1][b].view(np.uint16)
            assert same.mean() > 0.999, (b, same.mean())
            print(f"{VARIANT} tok={plan.tokens} {b}: {100 * same.mean():.3f}% of halves equal")
        race.run(f"{VARIANT} tok={plan.tokens}", kernel, forms, bufs, params, plan.moved(z), 5)


if __name__ == "__main__":
    main()
