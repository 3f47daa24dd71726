"""Probe 28 (H200): the flat f16 rotary appends on rotary pairs (their default since run 33)
against their per-vector form (``pairs=False``), alternately in one call.

Run 33 measured the pair form of ``window_shift_append_rotary_flat_f16`` at 83% of the copy
beside it at 2,048 tokens (batch 4), where run 21 measured it at 94% and run 32 the per-vector
form at 87%. This races both forms of both f16 appends, five rounds, best kept, after 20 s of
copies, at batch 4 (2,048 tokens and 1 token), each pair form checked against the vector form's
bytes.

    python benchmarks/probe28.py [--small]
"""

from __future__ import annotations

import dataclasses
import sys

import numpy as np

import probes
from kvdsl import catalog
from kvdsl.emit import emit
from kvdsl.runtime import adapter_info, run_source

VARIANTS = [
    "merge_share_append_rotary_flat_f16_llama31_8b",
    "window_shift_append_rotary_flat_f16_gemma2_2b",
]


def main(argv: list[str]) -> None:
    size, pool, race = probes.start(argv, 0 if "--small" in argv else 20)
    print(f"{adapter_info()['implementation']}: {adapter_info()['device']}")
    for m in probes.measurements(VARIANTS, size, pool):
        vector = catalog.build_config(dataclasses.replace(m.cfg, pairs=False), m.variant)
        forms = {"pairs": (m.text, m.wg)}
        forms["vector"] = (emit(vector), probes.workgroups(vector, m.params))
        outs = [
            run_source(text, m.kernel.bindings, m.kernel.params, dict(m.bufs), m.params, wg)
            for text, wg in forms.values()
        ]
        for name in outs[0]:
            same = np.array_equal(outs[0][name].view(np.uint16), outs[1][name].view(np.uint16))
            print(f"{m.label} {name}: pairs and vector forms write the same halves: {same}")
        race.run(m.label, m.kernel, forms, m.bufs, m.params, m.nbytes, 5)


if __name__ == "__main__":
    main(sys.argv[1:])
