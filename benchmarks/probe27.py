"""Probe 27 (H200): invocations per workgroup for the K RMSNorm drop-ins.

Runs 28-30 measured the K RMSNorm drop-ins at 78-87% of the copy beside them under wgpu-native
(batch 4, 2,048 and 8,192 tokens) where run 31 measured them at 88-98% under Dawn. Their block
walk waits at a barrier at each step (the row sums in workgroup memory), four steps of 256
lanes per workgroup; the flat K RMSNorm walks went from 256 to 128 invocations per workgroup for
the same reason (probe 21). This builds each K RMSNorm drop-in with ``flat.BLOCK_LANES`` at 64,
128 and 256, checks on the device that the forms write the same bytes as the 256-lane form,
and times them alternately with the copy, three rounds, best kept, after 20 s of copies.

    python benchmarks/probe27.py [--small]
"""

from __future__ import annotations

import sys

import probes
from kvdsl.nodes import flat
from kvdsl.runtime import adapter_info

VARIANTS = [
    "build_knorm_qwen3_06b",
    "build_knorm_rotary_qwen3_06b",
    "build_quant_int4_knorm_qwen3_06b",
    "build_quant_int8_knorm_qwen3_06b",
    "append_quant_int4_knorm_qwen3_06b",
    "append_quant_int8_knorm_qwen3_06b",
]
FORMS = {"256": 256, "128": 128, "64": 64}


def main(argv: list[str]) -> None:
    size, pool, race = probes.start(argv, 0 if "--small" in argv else 20)
    print(f"{adapter_info()['implementation']}: {adapter_info()['device']}")
    for m in probes.measurements(VARIANTS, size, pool):
        texts = {n: probes.emit_with(m, flat, BLOCK_LANES=lanes) for n, lanes in FORMS.items()}
        for name in ("128", "64"):
            probes.same_bytes(m, texts["256"], texts[name])
        forms = {name: (text, m.wg) for name, text in texts.items()}
        race.run(m.label, m.kernel, forms, m.bufs, m.params, m.nbytes, 3)


if __name__ == "__main__":
    main(sys.argv[1:])
