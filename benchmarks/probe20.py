"""Probe 20 (H200): why the workgroup-memory K RMSNorm kernels are slower under Dawn.

Run 14 timed the flat variants under Dawn (Chrome's WebGPU, Tint's SPIR-V): every row within a
few points of wgpu-native but the K RMSNorm kernels that reduce in workgroup memory, at 83-89%
of the copy where wgpu-native reaches 90-95% and their subgroup twins 92-97% under Dawn. Two
things Dawn adds to a kernel that uses workgroup memory: zeroing it at the start of every
workgroup (WebGPU requires zeroed workgroup memory; Tint emits the stores and a barrier unless
the driver zeroes it) and robustness clamps on every index. This races the emitted kernels
alternately with the copy, at 2,048 tokens of batch 4, in one process per setting:

    KVDSL_WEBGPU=dawn python benchmarks/probe20.py
    KVDSL_WEBGPU=dawn KVDSL_DAWN_DISABLE=disable_workgroup_init python benchmarks/probe20.py
    KVDSL_WEBGPU=dawn KVDSL_DAWN_DISABLE=disable_robustness python benchmarks/probe20.py
    python benchmarks/probe20.py   (wgpu-native)

(``--small``: llvmpipe smoke sizes.)
"""

from __future__ import annotations

import os
import sys

import probes
from kvdsl.runtime import adapter_info

VARIANTS = [
    "build_quant_int4_knorm_flat_qwen3_06b",
    "build_quant_int8_knorm_flat_qwen3_06b",
    "build_knorm_flat_qwen3_06b",
    "append_quant_int4_knorm_flat_qwen3_06b",
    "build_quant_int4_knorm_flat_sg_qwen3_06b",
    "build_quant_int4_flat_llama31_8b",
]


def main(argv: list[str]) -> None:
    size, pool, race = probes.start(argv, 0 if "--small" in argv else 15)
    setting = os.environ.get("KVDSL_DAWN_DISABLE") or "default"
    print(f"{adapter_info()['implementation']} ({setting}): {adapter_info()['device']}")
    for m in probes.measurements(VARIANTS, size, pool, decode=False):
        if m.plan.tokens == size["prefill"]:
            race.run(m.label, m.kernel, {"emitted": (m.text, m.wg)}, m.bufs, m.params, m.nbytes)


if __name__ == "__main__":
    main(sys.argv[1:])
