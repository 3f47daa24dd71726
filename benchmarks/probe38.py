"""Probe 38 (H200): the K RMSNorm drop-ins with naga's loop counters off.

naga (wgpu-native) bounds every loop of a module with a counter of its own
(``WGPUShaderRuntimeChecks_ForceLoopBounding``, gfx-rs/wgpu#7080): each trip of a drop-in's
step loop also steps and tests that counter, which the driver cannot prove away. Tint (Dawn)
writes no such counter, and the workgroup K RMSNorm drop-ins reach 87.5-95.5% of the copy
under Dawn against 77-91% under wgpu-native (run 52; the int8 ones 77% and 82%), where naga's
SPIR-V of the int8 build gets 35 registers from the driver and Tint's 64 (run 46). Probes 29
and 35 took single loops out by hand (the row sum's, the step loop's) with mixed results;
this keeps the code and removes every counter: ``KVDSL_LOOP_BOUNDING=0``
(:data:`kvdsl.runtime.device.LOOP_BOUNDING`) creates the modules through
``wgpuDeviceCreateShaderModuleTrusted`` with bounds checks alone (on llvmpipe the int8 K
RMSNorm drop-in's SPIR-V goes from 2,115 to 1,969 words, ``tests/test_shaderstats.py``).

Each form of each row is the same WGSL; both are checked on the device to write the same
bytes, then timed alternately with the copy, three rounds, after 20 s of copies, at batch 4
(decode rows too), under wgpu-native only (:func:`probes.race_settings`).

Result (eighth stop, ``results/h200/probe38.txt``, NOTE's *naga's runtime checks*): at 2,048
tokens every row within 3 points either way (the int8 build 81 → 78% of the copy beside it);
the decode appends take 5-16% less time without the counters, still 1.9-2.4x the empty
dispatch. The counters are not what parts naga's modules from Tint's.

    python benchmarks/probe38.py [--small]
"""

from __future__ import annotations

import sys

import probes
from kvdsl.runtime import adapter_info, device

VARIANTS = [
    *probes.KNORM_DROPINS,
    "append_quant_int8_knorm_sg_qwen3_06b",
    "build_quant_int8_llama31_8b",
    "merge_share_append_llama31_8b",
]


FORMS = {"bounded": {"LOOP_BOUNDING": True}, "unbounded": {"LOOP_BOUNDING": False}}


def main(argv: list[str], forms: dict[str, dict] = FORMS) -> None:
    """Race each of :data:`VARIANTS` under ``forms`` (settings of :mod:`kvdsl.runtime.device`)."""
    size, pool, race = probes.start(argv, 0 if "--small" in argv else 20)
    print(f"{adapter_info()['implementation']}: {adapter_info()['device']}")
    for m in probes.measurements(VARIANTS, size, pool):
        probes.race_settings(race, m, device, forms)


if __name__ == "__main__":
    main(sys.argv[1:])
