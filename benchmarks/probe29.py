"""Probe 29 (H200): the K RMSNorm row sum written out against its loop.

Under wgpu-native the K RMSNorm kernels that reduce in workgroup memory reach 78-87% of the
copy beside them (drop-ins, runs 28-29) and 80% (flat, 2,048 tokens, run 16), where Dawn runs
the same WGSL at 88-98%. After the barrier each invocation adds its row's partials in a loop of
``per_row / 4`` trips. naga's SPIR-V writer bounds every loop with a counter of its own
(gfx-rs/wgpu#7080, #7116), which may keep the driver from unrolling it; Tint's does not. This
builds each K RMSNorm kernel (drop-ins and flat, Qwen3-0.6B) with the sum as a loop
(``flat.UNROLL_SUMS = 0``) and written out (the default), checks on the device that both write
the same bytes, and times them alternately with the copy, three rounds, best kept, after 20 s
of copies, at batch 4.

Result (``results/h200/probe29.txt``, ``probe29-dawn.txt``): no gain. Both forms write the same
bytes; at 2,048 and 8,192 tokens they are within 2 points on most rows under both
implementations, and the written-out sum loses on the int4 drop-ins (2,048 tokens: 89% → 75% of
the copy under wgpu-native, 92% → 79% under Dawn) and on the int8 appends at 2,048 tokens. The
loop stays. The written-out form was commit c14608f (``flat.UNROLL_SUMS``), removed in the next
commit; this probe runs against that commit.

    python benchmarks/probe29.py [--small]
"""

from __future__ import annotations

import sys

import probes
from kvdsl.nodes import flat
from kvdsl.runtime import adapter_info

VARIANTS = [
    f"{mode}_{kind}knorm{walk}_qwen3_06b"
    for walk in ("", "_flat")
    for mode, kind in (
        ("build", ""),
        ("build", "quant_int4_"),
        ("build", "quant_int8_"),
        ("append", "quant_int4_"),
        ("append", "quant_int8_"),
    )
] + ["build_knorm_rotary_qwen3_06b", "build_knorm_rotary_flat_qwen3_06b"]


def main(argv: list[str]) -> None:
    size, pool, race = probes.start(argv, 0 if "--small" in argv else 20)
    print(f"{adapter_info()['implementation']}: {adapter_info()['device']}")
    for m in probes.measurements(VARIANTS, size, pool):
        loop = probes.emit_with(m, flat, UNROLL_SUMS=0)
        assert "for (var j" in loop and "for (var j" not in m.text, m.variant
        probes.same_bytes(m, m.text, loop)
        forms = {"unrolled": (m.text, m.wg), "loop": (loop, m.wg)}
        race.run(m.label, m.kernel, forms, m.bufs, m.params, m.nbytes, 3)


if __name__ == "__main__":
    main(sys.argv[1:])
