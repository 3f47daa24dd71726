"""Walk design probe 14 (H200): the two flat families still under 90% of the copy at batch 4.

**A. K RMSNorm in workgroup memory** (73-87%; the subgroup forms reach 91-99%). After the
barrier every invocation adds its row's ``HEAD_DIM_V4`` partials with four scalar accumulators:
32 scalar workgroup loads for a 128-wide row. Forms: the emitted kernel (WG 256); the same
config at WG 128 and 64; *v4 read*: the partials stored as ``array<vec4<f32>, WG/4>`` (each
invocation writes its lane ``wsum[lid.x / 4u][lid.x % 4u]``) and read back as ``HEAD_DIM_V4/4``
vec4 loads into one vec4 accumulator, whose lanes are exactly the four scalar accumulators (so
the sum is bit-identical; checked on the device); *v4 read* at WG 128; the ``*_flat_sg_*``
subgroup variant.

**B. f16 rotary append** (82% per vector, 88-89% per pair, 86% as eight halves per invocation in
probe 13): *pair words* combines the pair walk with probe 13's ``vec4<u32>`` words, so one
invocation loads both halves of a rotary pair as 16 halves, rotates them in f32 and stores
32 bytes of K and 32 of V; checked against the emitted kernel's halves on the device.

Every form is timed alternately with the others and the copy of the same bytes, five rounds,
best kept, after 30 s of copies.
"""

from __future__ import annotations

import dataclasses
import math
import re
import sys

import numpy as np

import probe13
import probes
from kvdsl import catalog
from kvdsl.emit import emit
from kvdsl.ir import workgroups
from kvdsl.runtime import run_source
from plans import Pool

KNORM = [
    "build_quant_int4_knorm_flat_qwen3_06b",
    "append_quant_int4_knorm_flat_qwen3_06b",
    "build_knorm_rotary_flat_qwen3_06b",
    "build_quant_int8_knorm_flat_qwen3_06b",
]
ROTARY = "merge_share_append_rotary_flat_f16_llama31_8b"
REDUCE = re.compile(r"  var ms: f32 = 0\.0f;\n.*?  ms = ms \+ ms1 \+ \(ms2 \+ ms3\);\n", re.DOTALL)
V4_REDUCE = """  var acc = vec4<f32>();
  for (var j: u32 = 0u; j < HEAD_DIM_V4 / 4u; j = j + 1u) {
    acc = acc + wsum[rowLane / 4u + j];
  }
  var ms: f32 = acc.x + acc.y + (acc.z + acc.w);
"""


def v4_read(text: str) -> str:
    """The emitted workgroup reduction with vec4 partials (see the module doc)."""
    wg = int(re.search(r"var<workgroup> wsum: array<f32, (\d+)>;", text)[1])
    out = text.replace(
        f"var<workgroup> wsum: array<f32, {wg}>;",
        f"var<workgroup> wsum: array<vec4<f32>, {wg // 4}>;",
    )
    out, n = re.subn(r"  wsum\[lid\.x\] = (.*);\n", r"  wsum[lid.x / 4u][lid.x % 4u] = \1;\n", out)
    assert n == 1
    out, n = REDUCE.subn(V4_REDUCE, out)
    assert n == 1
    return out


# probe 13's bindings, consts and halves()/packed() helpers, then the pair body.
PAIR_WORDS = probe13.WORDS[: probe13.WORDS.index("@compute")] + """@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let e = gid.x + gid.y * 65535u * WG;
  if (e >= params.count * HALF_V8) {
    return;
  }
  let dr = e % HALF_V8;
  let row = e / HALF_V8;
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
  let dst = ((b * KV_HEADS + hk) * params.seq + t) * HEAD_DIM_V8 + dr;
  let nSrc = (b * params.keySeq + j) * KV_HIDDEN_V8 + hk * HEAD_DIM_V8;
  let w0 = new_k[nSrc + dr];
  let w1 = new_k[nSrc + dr + HALF_V8];
  let v0 = new_v[nSrc + dr];
  let v1 = new_v[nSrc + dr + HALF_V8];
  let c0 = cos_cache[t * HALF_V4 + 2u * dr];
  let c1 = cos_cache[t * HALF_V4 + 2u * dr + 1u];
  let s0 = sin_cache[t * HALF_V4 + 2u * dr];
  let s1 = sin_cache[t * HALF_V4 + 2u * dr + 1u];
  let a0 = halves(w0.xy);
  let a1 = halves(w0.zw);
  let b0 = halves(w1.xy);
  let b1 = halves(w1.zw);
  present_key[dst] = vec4<u32>(packed(a0 * c0 - b0 * s0), packed(a1 * c1 - b1 * s1));
  present_key[dst + HALF_V8] = vec4<u32>(packed(b0 * c0 + a0 * s0), packed(b1 * c1 + a1 * s1));
  present_value[dst] = v0;
  present_value[dst + HALF_V8] = v1;
}
"""


def same(kernel, forms, bufs, params, label: str, view) -> None:
    """Every form writes what the first writes (``view``: the dtype compared)."""
    outs = [
        run_source(t, kernel.bindings, kernel.params, dict(bufs), params, w)
        for t, w in forms.values()
    ]
    names = list(forms)
    for name, out in zip(names[1:], outs[1:]):
        for b in outs[0]:
            eq = outs[0][b].view(view) == out[b].view(view)
            print(f"{label} {name} {b}: {100 * eq.mean():.3f}% equal", flush=True)


def knorm(pool: Pool, race: probes.Race, size) -> None:
    for m in probes.measurements(KNORM, size, pool, decode=False):
        if "array<vec4<f32>" in m.text:
            print(f"{m.variant} is emitted with vec4 partials now; probe14.txt is this record")
            continue
        k128 = catalog.build_config(dataclasses.replace(m.cfg, workgroup_size=128), m.variant)
        k64 = catalog.build_config(dataclasses.replace(m.cfg, workgroup_size=64), m.variant)
        sg = catalog.build_config(dataclasses.replace(m.cfg, reduction="subgroup"), m.variant)
        w128, w64 = workgroups(k128, m.params), workgroups(k64, m.params)
        forms = {
            "wg256": (m.text, m.wg),
            "v4 read": (v4_read(m.text), m.wg),
            "wg128": (emit(k128), w128),
            "v4 r128": (v4_read(emit(k128)), w128),
            "wg64": (emit(k64), w64),
            "sg": (emit(sg), workgroups(sg, m.params)),
        }
        exact = {k: forms[k] for k in ("wg256", "v4 read", "wg128", "v4 r128", "wg64")}
        same(m.kernel, exact, m.bufs, m.params, m.label, np.uint32)
        race.run(m.label, m.kernel, forms, m.bufs, m.params, m.nbytes, 5)


def rotary(pool: Pool, race: probes.Race, size) -> None:
    for m in probes.measurements([ROTARY], size, pool):
        assert "HEAD_DIM_V4: u32 = 32u" in m.text, "the probe's words kernels are for head dim 128"
        assert m.wg[1] == m.wg[2] == 1
        pairs = catalog.build_config(dataclasses.replace(m.cfg, pairs=True), ROTARY)
        forms = {
            "vec4<f16>": (m.text, m.wg),
            "pairs": (emit(pairs), workgroups(pairs, m.params)),
            "words": (probe13.WORDS, (math.ceil(m.wg[0] / 2), 1, 1)),
            "pair words": (PAIR_WORDS, (math.ceil(m.wg[0] / 4), 1, 1)),
        }
        same(m.kernel, forms, m.bufs, m.params, m.label, np.uint16)
        race.run(m.label, m.kernel, forms, m.bufs, m.params, m.nbytes, 5)


def main() -> None:
    size, pool, race = probes.start(sys.argv)
    only = [a for a in sys.argv[1:] if not a.startswith("--")]
    if not only or "knorm" in only:
        knorm(pool, race, size)
    if not only or "rotary" in only:
        rotary(pool, race, size)


if __name__ == "__main__":
    main()
