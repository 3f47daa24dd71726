"""Probe 40 (H200): the K RMSNorm kernels with V stored before the norm's barrier.

Only K needs the row's norm; V is loaded with it and, until now, quantised and stored after the
norm's reduction, beside K. The workgroup K RMSNorm drop-ins stay at 77-88% of the copy at
2,048 tokens under wgpu-native (probes 29-39 ruled out a dozen causes). With
:data:`kvdsl.kernels.build.V_BEFORE_NORM` the invocations that write store V (quantised where
the mode quantises) before the reduction, under the same guard as K's stores after it: fewer
values live across the barrier, and V's stores are in flight while the workgroup waits.

Both forms of each row are emitted by the builder, checked on the device to write the same
bytes, and timed alternately with the copy, three rounds after 20 s of copies, at batch 4
(decode rows too; :func:`probes.race_forms`). Run it under both implementations
(``KVDSL_WEBGPU=dawn``): a drop-in must not lose under Tint what it gains under naga.

    python benchmarks/probe40.py [--small]
"""

from __future__ import annotations

import contextlib
import sys

import probes
from kvdsl.kernels import build
from kvdsl.runtime import adapter_info

VARIANTS = [
    "build_quant_int8_knorm_qwen3_06b",
    "append_quant_int8_knorm_qwen3_06b",
    "build_quant_int4_knorm_qwen3_06b",
    "append_quant_int4_knorm_qwen3_06b",
    "build_knorm_qwen3_06b",
    "build_knorm_rotary_qwen3_06b",
    "build_knorm_rotary_sg_qwen3_06b",
    "append_quant_int8_knorm_sg_qwen3_06b",
    "build_quant_int8_knorm_flat_qwen3_06b",
    "append_quant_int4_knorm_flat_sg_qwen3_06b",
]


def main(argv: list[str]) -> None:
    size, pool, race = probes.start(argv, 0 if "--small" in argv else 20)
    print(f"{adapter_info()['implementation']}: {adapter_info()['device']}")
    for m in probes.measurements(VARIANTS, size, pool):
        forms = {
            name: (probes.emit_with(m, build, V_BEFORE_NORM=first), contextlib.nullcontext)
            for name, first in (("after", False), ("before", True))
        }
        probes.race_forms(race, m, forms)


if __name__ == "__main__":
    main(sys.argv[1:])
