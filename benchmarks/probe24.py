"""Probe 24 (H200): the block walk's invocations per workgroup and steps per loop trip.

The drop-ins keep the template's dispatch, so each lane walks up to ``per_row`` steps of its
workgroup's rows; a step loads and stores, and the GPU cannot issue the next step's loads before
this step's stores; and at 64 invocations per workgroup a 2,048-token prefill runs two warps
per workgroup, a sixth of the GPU's warp slots. This builds each variant with
``flat.BLOCK_LANES`` (invocations per workgroup at most: the template's 64, or 256), checks on
the device that each form writes the bytes of the template's shape (64 lanes), and times them
alternately with the copy, three rounds, best kept, after 20 s of copies.

Records (``benchmarks/results/h200``): ``probe24-steps.txt`` (the first call, before the
block walk took more lanes: forms ``x1``-``x8``, steps per trip at 64 lanes) and
``probe24.txt`` (the second, the code of commit 57fefc5: forms ``64x1``, ``256x1``, ``256x2``,
``256x4``, lanes x steps per trip).
Steps per trip were built by ``kvdsl/ir/interleave.py`` (commit 57fefc5: unroll the step loop
and sink every copy's stores below every load) and ``flat.BLOCK_STEPS``, removed after these
calls: at 256 lanes two steps per trip made decode appends up to 23% faster and prefill up to
20% slower, four steps slower still. 256 lanes alone: 47-92% → 78-96% of the copy at batch 4,
decode appends about twice as fast.

    python benchmarks/probe24.py [--small]
"""

from __future__ import annotations

import sys

import probes
from kvdsl.nodes import flat
from kvdsl.runtime import adapter_info

VARIANTS = [
    "copy_llama31_8b",
    "copy_f16_llama31_8b",
    "merge_llama31_8b",
    "merge_share_append_llama31_8b",
    "merge_share_append_rotary_llama31_8b",
    "merge_share_append_rotary_f16_llama31_8b",
    "window_shift_llama31_8b",
    "window_shift_append_rotary_llama31_8b",
    "build_rotary_llama31_8b",
    "build_quant_int8_llama31_8b",
    "build_quant_int4_rotary_llama31_8b",
    "append_quant_int8_llama31_8b",
    "append_quant_int4_llama31_8b",
    "build_knorm_rotary_qwen3_06b",
    "append_quant_int8_knorm_qwen3_06b",
]
FORMS = {"64": 64, "256": 256}


def main(argv: list[str]) -> None:
    size, pool, race = probes.start(argv, 0 if "--small" in argv else 20)
    print(f"{adapter_info()['implementation']}: {adapter_info()['device']}")
    for m in probes.measurements(VARIANTS, size, pool):
        texts = {n: probes.emit_with(m, flat, BLOCK_LANES=lanes) for n, lanes in FORMS.items()}
        probes.same_bytes(m, texts["64"], texts["256"])
        forms = {name: (text, m.wg) for name, text in texts.items()}
        race.run(m.label, m.kernel, forms, m.bufs, m.params, m.nbytes, 3)


if __name__ == "__main__":
    main(sys.argv[1:])
