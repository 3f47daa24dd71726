"""Probe 32 (H200): 128 against 256 lanes for the drop-ins below 90% that are not K RMSNorm.

Runs 34-37 (batch 4, 2,048 tokens) measured these block-walk drop-ins at 85-90% of the copy
beside them, where the flat walk runs the same program at 93-101%. At 2,048 tokens the
template's dispatch makes 1,024 workgroups; at 256 lanes and a few dozen registers an
invocation, an SM holds fewer than the eight workgroups that would take them in one wave, and
the last wave runs part full. Probe 24 raced 256 against 64 lanes (256 faster everywhere);
probe 27 raced 128 for the K RMSNorm drop-ins only. This builds each with
``flat.BLOCK_LANES`` at 256 and 128, checks on the device that both write the same bytes, and
times them alternately with the copy, three rounds, best kept, after 20 s of copies, at batch 4.

Result (``results/h200/probe32.txt``): the same bytes, and no lane count wins on every row.
At 2,048 tokens 128 lanes gained 2 points on the int8 build (88 → 90%) and 3 on the per-row
rotary append, lost 5 on the int8 build from f16 (88 → 83%) and matched on the plain build; at 8,192
tokens -3 to +3 points; at 1 token 128 lanes were 26-27% slower on both appends. The
window-shift append's 2,048-token row (72 → 86%) ran beside a slow copy (75.8 µs where 38 is
usual). The block walk keeps 256 lanes.

    python benchmarks/probe32.py [--small]
"""

from __future__ import annotations

import sys

import probes
from kvdsl.nodes import flat
from kvdsl.runtime import adapter_info

VARIANTS = [
    "build_quant_int8_llama31_8b",
    "build_quant_int8_f16_in_llama31_8b",
    "window_shift_append_rotary_llama31_8b",
    "merge_share_append_rotary_per_row_llama31_8b",
    "build_llama31_8b",
]


def main(argv: list[str]) -> None:
    size, pool, race = probes.start(argv, 0 if "--small" in argv else 20)
    print(f"{adapter_info()['implementation']}: {adapter_info()['device']}")
    for m in probes.measurements(VARIANTS, size, pool):
        half = probes.emit_with(m, flat, BLOCK_LANES=128)
        assert "const LANES: u32 = 128u;" in half and "const LANES: u32 = 256u;" in m.text
        probes.same_bytes(m, m.text, half)
        forms = {"256": (m.text, m.wg), "128": (half, m.wg)}
        race.run(m.label, m.kernel, forms, m.bufs, m.params, m.nbytes, 3)


if __name__ == "__main__":
    main(sys.argv[1:])
