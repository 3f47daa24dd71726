"""Probe 33 (H200): the K RMSNorm drop-ins with their small tables loaded after the barrier.

An invocation of a K RMSNorm drop-in issues every load before the row's barrier: K and V, the
norm weights and, for the quantising ones, 16 scale loads (four per vector and binding). Probe
6 found one memory round trip better than two for the flat walk, but the weights and scales
are small tables the cache holds (a few KB), and each value loaded before the barrier stays in
a register across it. This races the emitted kernel against a *late* form of it (text moved,
nothing else): the ``let``s of the weights, the scale indices and the scales sit after
``invRms``, right before their first use. Same bytes (checked on the device), three rounds,
best kept, after 20 s of copies, at batch 4.

Result (``results/h200/probe33.txt``, ``probe33-dawn.txt``): the same bytes, and no form wins on
every row. Under wgpu-native the int8 append gained at 2,048 tokens (78% → 88% of the copy),
the int8 build a point, the int4 ones lost 8-10 points (build 77% → 67%, append 85% → 77%),
the plain and rotary builds and every 1-token row within a point. Under Dawn the late form lost
at 2,048 tokens on every quantising row (int8 build 89% → 82%, append 86% → 81%, int4 92% → 82%
and 89% → 79%) and gained on two 8,192-token rows. The loads stay before the barrier.

    python benchmarks/probe33.py [--small]
"""

from __future__ import annotations

import re
import sys

import probes
from kvdsl.runtime import adapter_info

VARIANTS = probes.KNORM_DROPINS
LATE = re.compile(r"^\s*let (w0|w1|s0Base|sStep|s1Base|ks0|ks1|vs0|vs1) = ")


def late_form(text: str) -> str:
    """``text`` with the weight and scale ``let``s moved to just after ``let invRms``."""
    lines = text.splitlines()
    moved = [line for line in lines if LATE.match(line)]
    rest = [line for line in lines if not LATE.match(line)]
    at = next(i for i, line in enumerate(rest) if line.lstrip().startswith("let invRms ="))
    assert moved, "no weight lets"
    return "\n".join(rest[: at + 1] + moved + rest[at + 1 :]) + "\n"


def main(argv: list[str]) -> None:
    size, pool, race = probes.start(argv, 0 if "--small" in argv else 20)
    print(f"{adapter_info()['implementation']}: {adapter_info()['device']}")
    for m in probes.measurements(VARIANTS, size, pool):
        late = late_form(m.text)
        probes.same_bytes(m, m.text, late)
        forms = {"emitted": (m.text, m.wg), "late": (late, m.wg)}
        race.run(m.label, m.kernel, forms, m.bufs, m.params, m.nbytes, 3)


if __name__ == "__main__":
    main(sys.argv[1:])
