"""Probe 43 (H200): the K RMSNorm drop-ins' block walk at 256, 128 and 64 lanes, each form's
registers read beside its time.

Probe 41 found the 2,048-token drop-ins sensitive to how many workgroups a multiprocessor
holds, and probe 42 that moving ``let``s below the barrier changes neither naga's registers
(35 for the int8 drop-ins) nor their times. The other lever is the block walk's lanes
(:data:`flat.BLOCK_LANES`, 256 since probe 24): the host still dispatches the template's
1,024 workgroups at 2,048 tokens, and at 128 lanes a multiprocessor holds twice as many of
them for the same registers, so a 35-register module takes them all in one wave (12 a
multiprocessor against 6). Each lane then runs twice the steps. Probe 24 chose 256 over 64
for every drop-in when the K RMSNorm ones reduced over 64 lanes; 128 was not timed.

Each variant (the workgroup and subgroup K RMSNorm drop-ins) is built at 256 (as emitted), 128
and 64 lanes, checked on the device to write the same bytes, and timed alternately with the
copy (:func:`probes.race_forms`, three rounds) at batch 4, 2,048 / 8,192 tokens and one
token, under the Vulkan layer (:mod:`shaderstats`) so each form's registers print beside it.
Run it under both implementations (``KVDSL_WEBGPU=dawn``).

    python benchmarks/probe43.py [--small] [VARIANT ...]
"""

from __future__ import annotations

import sys

import probes
from kvdsl.nodes import flat

VARIANTS = probes.KNORM_DROPINS + [v.replace("_qwen3", "_sg_qwen3") for v in probes.KNORM_DROPINS]
LANES = (256, 128, 64)


def lanes(m: probes.Measurement) -> dict[str, str]:
    """``m``'s kernel built at each of :data:`LANES` block lanes."""
    texts = {f"{n} lanes": probes.emit_with(m, flat, BLOCK_LANES=n) for n in LANES}
    assert texts["256 lanes"] == m.text, "the emitted kernel walks 256 lanes"
    return texts


def main(argv: list[str]) -> None:
    names = [a for a in argv if not a.startswith("--")] or VARIANTS
    probes.race_with_registers(__file__, argv, names, lanes)


if __name__ == "__main__":
    main(sys.argv[1:])
