"""Probe 40 (H200): the K RMSNorm kernels with V stored before the norm's barrier.

Only K needs the row's norm; V is loaded with it and quantised and stored after the norm's
reduction, beside K. The workgroup K RMSNorm drop-ins stay at 77-88% of the copy at 2,048
tokens under wgpu-native (probes 29-39 ruled out a dozen causes). With
``kvdsl.kernels.build.V_BEFORE_NORM`` (record commit ef21d9e) the invocations that write
store V (quantised where the mode quantises) before the reduction, under the same guard as K's
stores after it: fewer values live across the barrier, and V's stores are in flight while the
workgroup waits.

Both forms of each row are emitted by the builder, checked on the device to write the same
bytes, and timed alternately with the copy, three rounds after 20 s of copies, at batch 4
(decode rows too; :func:`probes.race_forms`). Run it under both implementations
(``KVDSL_WEBGPU=dawn``): a drop-in must not lose under Tint what it gains under naga.

Result (eighth stop, ``results/h200/probe40.txt``, ``probe40-dawn.txt``; one call, medians of
three rounds): the same bytes everywhere. Under wgpu-native at 2,048 tokens V first lifts the
quantising workgroup drop-ins by 1-6 points (int8 build 77 → 81%, int4 build 79 → 85%, int8
append 77 → 79%, int4 append 77 → 78%) and the rotary one by 4 (86 → 90%), and costs the plain
build 2 (92 → 90%) and the flat int4 subgroup append 3; under Dawn it costs the quantising
drop-ins 2-4 points (int8 build 89 → 87%, int4 build 90 → 86%) and every decode append 3-5,
holds the plain and rotary builds, and lifts the subgroup rotary build 5 (88 → 93%). What
naga gains, Tint loses, as with probes 33 and 35; only the rotary builds gain under one and
hold under the other, too few points on too few rows to change the kernels without the
benchmark's own runs of them. The form stays at the record commit ef21d9e
(``build.V_BEFORE_NORM``); run this probe with that commit's ``kvdsl`` on the path
(``git archive ef21d9e kvdsl | tar -x -C p40``, then
``PYTHONPATH=$PWD/p40:$PYTHONPATH python3 benchmarks/probe40.py``).

    python benchmarks/probe40.py [--small]
"""

from __future__ import annotations

import contextlib
import sys

import probes
from kvdsl.kernels import build
from kvdsl.runtime import adapter_info

VARIANTS = [
    *probes.KNORM_DROPINS,
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
