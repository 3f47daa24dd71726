"""Probe 30 (H200): the K RMSNorm drop-ins with two workgroup-memory slots, one barrier a step.

The block walk of a K RMSNorm drop-in waits at two barriers in each of its steps: one before
the lanes read their row's partials, one at the end of the step before the next step writes
the same workgroup memory. With two slots by step parity (``flat.STEP_BUFFERS = 2``) the
second barrier goes: step ``s + 1`` writes the other slot, and no lane can reach step ``s + 2``
(which writes this one again) before every lane has passed step ``s + 1``'s barrier, after its
reads of step ``s``. A lane may then issue the next step's loads while others still finish
this one. This builds each K RMSNorm drop-in both ways, checks on the device that they write
the same bytes, and times them alternately with the copy, three rounds, best kept, after 20 s
of copies, at batch 4.

Result (``results/h200/probe30.txt``, ``probe30-dawn.txt``): both forms write the same bytes
and time within a point of each other on every row not met by a slow state, under both
implementations (wgpu-native 2,048 tokens: build 90 / 90%, rotary 86 / 87%, int4 build 89 / 90%,
int8 build 76 / 77%, int4 append 88 / 88%; 1 token 8.91 / 8.80 µs and 8.94 / 8.82 µs). The
barrier that ends a step costs nothing measurable; the one slot stays. The two-slot form was
commit 1988186 (``flat.STEP_BUFFERS``), removed in the next commit; this probe runs against it.

    python benchmarks/probe30.py [--small]
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


def main(argv: list[str]) -> None:
    size, pool, race = probes.start(argv, 0 if "--small" in argv else 20)
    print(f"{adapter_info()['implementation']}: {adapter_info()['device']}")
    for m in probes.measurements(VARIANTS, size, pool):
        two = probes.emit_with(m, flat, STEP_BUFFERS=2)
        assert two.count("workgroupBarrier") == 1 and m.text.count("workgroupBarrier") == 2
        probes.same_bytes(m, m.text, two)
        forms = {"one slot": (m.text, m.wg), "two slots": (two, m.wg)}
        race.run(m.label, m.kernel, forms, m.bufs, m.params, m.nbytes, 3)


if __name__ == "__main__":
    main(sys.argv[1:])
