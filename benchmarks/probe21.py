"""Probe 21 (H200): the workgroup size of the workgroup-memory K RMSNorm kernels, again.

Probe 14 found workgroups of 128 or 64 invocations 1-3 points faster than 256 at 2,048 tokens
and 20-40 points slower at 8,192, where a dispatch of 128-wide workgroups passed the 65,535
fold and the old fold launched twice the workgroups (probe 18). The flat walks now fold
balanced, so this times the flat K RMSNorm kernels that reduce in workgroup memory at 256 (the
emitted default), 128 and 64 invocations per workgroup (the same config otherwise), alternately
with the copy of the same bytes, at batch 4: 2,048 and 8,192 tokens (builds), 2,048 and 1
(appends). Run under wgpu-native and under Dawn (``KVDSL_WEBGPU=dawn``), where these kernels
lag (probe 20).

    [KVDSL_WEBGPU=dawn] python benchmarks/probe21.py [--small]
"""

from __future__ import annotations

import dataclasses
import sys

import probes
from kvdsl.runtime import adapter_info

VARIANTS = [
    "build_knorm_flat_qwen3_06b",
    "build_knorm_rotary_flat_qwen3_06b",
    "build_quant_int4_knorm_flat_qwen3_06b",
    "build_quant_int8_knorm_flat_qwen3_06b",
    "append_quant_int4_knorm_flat_qwen3_06b",
    "append_quant_int8_knorm_flat_qwen3_06b",
]
SIZES = (256, 128, 64)


def main(argv: list[str]) -> None:
    size, pool, race = probes.start(argv, 0 if "--small" in argv else 15)
    print(f"{adapter_info()['implementation']}: {adapter_info()['device']}")
    for variant in VARIANTS:
        forms = {
            ws: list(
                probes.measurements(
                    [variant],
                    size,
                    pool,
                    tweak=lambda c, ws=ws: dataclasses.replace(c, workgroup_size=ws),
                )
            )
            for ws in SIZES
        }
        for i, m in enumerate(forms[SIZES[0]]):
            texts = {f"wg{ws}": (forms[ws][i].text, forms[ws][i].wg) for ws in SIZES}
            race.run(m.label, m.kernel, texts, m.bufs, m.params, m.nbytes)


if __name__ == "__main__":
    main(sys.argv[1:])
