"""Probe 41 (H200): do the block-walk drop-ins at 2,048 tokens lose to their last wave?

At batch 4 and 2,048 tokens the template's dispatch gives a build 1,024 workgroups (64 rows
each), and the block walk runs 256 invocations in each. An H200 multiprocessor holds 2,048
invocations and 65,536 registers: eight such workgroups at up to 32 registers an invocation,
six at 33-40, four at 41-64. The driver gives naga's int8 K RMSNorm drop-in 35 registers (six
per multiprocessor: 792 at once on 132, so 1,024 take a full wave and a fifth of another) and
Tint's 64 (four: 528, two nearly full waves); the plain K RMSNorm and subgroup drop-ins 32
(eight: 1,056, one wave). Under wgpu-native the int8 K RMSNorm drop-ins reach 77-82% of the
copy at 2,048 tokens and 91-92% at 8,192 (4,096 workgroups), under Dawn 87-90%.

If a part-full last wave costs them the difference, the share of the copy a kernel reaches
moves with the token count: high where its workgroups fill whole waves, low just past. This
times each variant at several token counts at batch 4 (workgroups = tokens / 2), alternately
with the copy of the same bytes, three rounds, best kept, after 20 s of copies.

Result (ninth stop, ``results/h200/probe41*.txt``, NOTE's *Waves*): yes, in part. Under
wgpu-native the kernels of six workgroups a multiprocessor lose 2-11 points from 792
workgroups (one wave) to 924-1,056 (the int8 K RMSNorm drop-in 86 → 75-77%), and those of
eight lose 1-15 points at 1,584 (1.5 waves); under Dawn (64 registers, four a multiprocessor)
the int8 K RMSNorm drop-in stays at 87-91% at every count. At one full wave naga's int8
drop-in still reaches only 86%, and at 528 workgroups 81% against Dawn's 90%: the rest is how
much an invocation keeps in flight (35 registers against 64).

    python benchmarks/probe41.py [--small]          (KVDSL_WEBGPU=dawn for Dawn)
"""

from __future__ import annotations

import sys

import probes
from kvdsl.runtime import adapter_info

VARIANTS = [
    "build_quant_int8_knorm_qwen3_06b",
    "build_quant_int8_knorm_sg_qwen3_06b",
    "build_knorm_qwen3_06b",
    "build_knorm_rotary_qwen3_06b",
    "build_quant_int8_llama31_8b",
    "build_llama31_8b",
]
# Workgroups at batch 4 (8 heads, 64 rows each): 528 (four per multiprocessor of 132), 792
# (six), 924 (seven), 1,024 (the benchmark's), 1,056 (eight), 1,584 (two waves of six), 2,048.
TOKENS = (1056, 1584, 1848, 2048, 2112, 3168, 4096)


def main(argv: list[str]) -> None:
    size, pool, race = probes.start(argv, 0 if "--small" in argv else 20)
    print(f"{adapter_info()['implementation']}: {adapter_info()['device']}", flush=True)
    for tokens in (8, 16) if "--small" in argv else TOKENS:
        seen = set()
        for m in probes.measurements(VARIANTS, size | {"prefill": tokens, "cache": tokens}, pool):
            if m.plan.tokens != tokens or m.variant in seen:
                continue
            seen.add(m.variant)
            label = f"{m.label} wg={m.wg[0] * m.wg[1] * m.wg[2]}"
            race.run(label, m.kernel, {"emitted": (m.text, m.wg)}, m.bufs, m.params, m.nbytes)
        pool.arrays.clear()
        race.reuse.clear()
        race.roof_reuse.clear()


if __name__ == "__main__":
    main(sys.argv[1:])
