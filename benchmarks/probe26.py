"""Probe 26 (H200): steps per loop trip for the drop-ins' decode appends, at 256 lanes.

Probe 24's second call measured two and four steps per trip (``kvdsl/ir/interleave.py``) at 256
lanes in a slow state of the GPU (copies beside the decode rows at 7-10 µs where 5 is usual):
up to 23% faster at one token, up to 20% slower at 2,048 tokens. If one token gained enough,
a kernel could pick its trip shape from its dispatch (a uniform branch on the workgroup count).
This times only the decode appends (every drop-in append representative, batches 4 and 1),
one, two and four steps per trip, alternately with the copy, five rounds, best kept, after 30 s
of copies, each form checked against the 1-step form's bytes.

Seventh stop (``probe26b.txt``, ``probe26c.txt``): run again in one call and found in the same
slow state (1-token copies at 10-11 µs); timed alone, decode-size work lets the GPU clock down.
With a second of 256 MB copies before each race (``probes.Race`` now does so before every
decode-size race; ``probe26c.txt``: batch-1 copies at 5.1-5.8 µs, batch-4 ones at 5.3-7.2): at batch 4 four steps per trip gained 10% on the plain
``merge_share`` append (8.08 → 7.26 µs), 6% on the ``window_shift`` one and 3% on int4, and
lost 0.3-7% on the rotary and int8 ones; at batch 1 every row lost (two steps 1-5%, four 5-15%).
The answer stands: no second loop.

The pass was removed after probe 24: run this with commit 57fefc5's ``kvdsl`` first on the
path (``git archive 57fefc5 kvdsl | tar -x -C p26``, then ``PYTHONPATH=$PWD/p26:$PYTHONPATH
python3 benchmarks/probe26.py``).

    python benchmarks/probe26.py [--small]
"""

from __future__ import annotations

import sys

import probes
from kvdsl.nodes import flat
from kvdsl.runtime import adapter_info

VARIANTS = [
    "merge_share_append_llama31_8b",
    "merge_share_append_rotary_llama31_8b",
    "merge_share_append_rotary_f16_llama31_8b",
    "window_shift_append_gemma2_2b",
    "window_shift_append_rotary_llama31_8b",
    "window_shift_append_rotary_f16_gemma2_2b",
    "append_quant_int8_llama31_8b",
    "append_quant_int4_llama31_8b",
]
STEPS = (1, 2, 4)


def main(argv: list[str]) -> None:
    size, pool, race = probes.start(argv, 0 if "--small" in argv else 30)
    size["batches"] = (4, 1)
    print(f"{adapter_info()['implementation']}: {adapter_info()['device']}")
    for m in probes.measurements(VARIANTS, size, pool):
        if m.plan.tokens != 1:
            continue
        texts = {f"x{n}": probes.emit_with(m, flat, BLOCK_STEPS=n) for n in STEPS}
        for name in ("x2", "x4"):
            probes.same_bytes(m, texts["x1"], texts[name])
        forms = {name: (text, m.wg) for name, text in texts.items()}
        race.run(f"{m.label} B={m.plan.batch}", m.kernel, forms, m.bufs, m.params, m.nbytes, 5)


if __name__ == "__main__":
    main(sys.argv[1:])
