"""Probe 34 (H200): the K RMSNorm drop-ins with the row reduced across the subgroup.

Runs 34-40 measured the K RMSNorm drop-ins at 77-90% of the copy beside them at 2,048 tokens
(batch 4) under wgpu-native, where the flat walk's subgroup form runs the same program at
91-100% (probe 8). Their block walk passes a workgroup barrier twice per step (the reduction and
the step's end), four to eight steps per workgroup; probes 29-33 changed everything around those
barriers and none held on every row. ``reduction="subgroup"`` now serves the block walk too (the
``*_knorm_sg_*`` drop-ins): where a subgroup holds a row (NVIDIA's 32 lanes, head dim 128) a step
passes no barrier. This builds each K RMSNorm drop-in four ways, checks on the device what each
writes against the catalog's workgroup form (the sums' order differs, so K may differ in the
last ulps: 91-92% of its halves alike), and times them alternately with the copy, three rounds,
best kept, after 20 s of copies, at batch 4:

- ``wg``: the catalog's workgroup-memory drop-in (pairs, as ``flat.uses_pairs`` picks);
- ``wg-vectors``: the same on one invocation per vector (twice the steps, half the registers);
- ``sg``: the subgroup drop-in on one invocation per vector;
- ``sg-pairs``: the subgroup drop-in on the pair walk (half the steps).

(``pairs`` is the flat walk's option only, so ``flat._pairs`` is patched for each build.)

Results (``results/h200/``: ``probe34-run41.txt``, the first three forms before the block walk's
loop stopped at its last step with items; ``probe34.txt`` and ``probe34-dawn.txt``, runs 42-43,
the same three after it; ``probe34b.txt`` and ``probe34b-dawn.txt``, run 44, all four). Under
wgpu-native at 2,048 tokens the subgroup form on vectors lifts the int8 build from 77-78% to
90-92% of the copy and the int8 append from 76-77% to 89%, the rotary build from 85-86% to
88-89%, and matches the rest (plain build 90-91%, int4 build 89-90%); on pairs it loses those
int8 gains (81-82%, 79%) but gains on the int4 append (73-77% → 84-87%). At 8,192 tokens all
forms are within 2 points (89-96%). Under Dawn every form of a row is within 1-3 points
(88-92% at 2,048 tokens). On vectors the workgroup form gains 5-6 points on the int8 rows under
wgpu-native (77 → 83%, 76 → 82%) and loses as much under Dawn, and loses 6-16 points on int4
under both. So the ``*_knorm_sg_*`` drop-ins walk vectors but the int4 ones, which walk pairs
(``flat.uses_pairs``), and the workgroup drop-ins keep pairs. The workgroup form's int4 append
at 2,048 tokens read 35-50% in three of the five calls (77-84% in the other two); it is the
first form timed after a 1-token plan, and ``benchmarks/gpu.py`` timed the same kernel at 86%
(wgpu-native) and 88% (Dawn) in runs 42-43, so that row of the probe is left out of the
comparison, unexplained.

    python benchmarks/probe34.py [--small]
"""

from __future__ import annotations

import dataclasses
import sys

import probes
from kvdsl.nodes import flat
from kvdsl.runtime import adapter_info

VARIANTS = [
    "build_knorm_qwen3_06b",
    "build_knorm_rotary_qwen3_06b",
    "build_quant_int8_knorm_qwen3_06b",
    "build_quant_int4_knorm_qwen3_06b",
    "append_quant_int8_knorm_qwen3_06b",
    "append_quant_int4_knorm_qwen3_06b",
]


def main(argv: list[str]) -> None:
    size, pool, race = probes.start(argv, 0 if "--small" in argv else 20)
    print(f"{adapter_info()['implementation']}: {adapter_info()['device']}")
    for m in probes.measurements(VARIANTS, size, pool):
        sg = dataclasses.replace(m, cfg=dataclasses.replace(m.cfg, reduction="subgroup"))
        texts = {"wg": m.text}
        texts["wg-vectors"] = probes.emit_with(m, flat, _pairs=lambda cfg: False)
        texts["sg"] = probes.emit_with(sg, flat, _pairs=lambda cfg: False)
        texts["sg-pairs"] = probes.emit_with(sg, flat, _pairs=lambda cfg: True)
        assert "dr = e % HALF" in texts["sg-pairs"] and "dr = e % HALF" not in texts["sg"]
        assert "dr = e % HALF" in m.text and "dr = e % HALF" not in texts["wg-vectors"]
        for name in ("wg-vectors", "sg", "sg-pairs"):
            probes.same_bytes(m, m.text, texts[name])
        assert "subgroupShuffleXor" in texts["sg"] and "subgroupShuffleXor" not in m.text
        forms = {name: (text, m.wg) for name, text in texts.items()}
        race.run(m.label, m.kernel, forms, m.bufs, m.params, m.nbytes, 3)


if __name__ == "__main__":
    main(sys.argv[1:])
