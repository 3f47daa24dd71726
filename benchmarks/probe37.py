"""Probe 37 (H200): is a kernel's slow reading its buffers' placement?

Some rows read far slower in one run than in the others while the copy beside them ran at its
usual speed: in run 51 ``build_rotary_f16_llama31_8b`` at 8,192 tokens took 189 µs (54% of
the copy) where runs 36-40 measured 98-124 µs, and ``build_quant_int8_flat_llama31_8b`` at
2,048 tokens 63 µs (69%) where seven runs measured 42-46 µs; in probe 36's call the int8
append and the window-shift append drop-ins read 51-68% at 2,048 tokens, 89-93% in run 51. A
run allocates each kernel's device buffers once, in an order set by the variants before it.

For each row this allocates the kernel's buffers afresh ``PLACEMENTS`` times, each time behind
a ballast buffer of another size kept alive (so the allocator places them elsewhere), and
times the kernel three times on each placement, alternately with one copy of the same bytes
whose buffers never move. Kernel times that agree within a placement and split between
placements say the placement sets the speed; times that split within a placement say the GPU's
state does.

    python benchmarks/probe37.py [--small]
"""

from __future__ import annotations

import sys

import numpy as np

import probes
import roofline
from kvdsl.runtime import adapter_info, time_kernel
from kvdsl.runtime.device import device

ROWS = [
    ("build_rotary_f16_llama31_8b", 8192),
    ("build_quant_int8_flat_llama31_8b", 2048),
    ("append_quant_int8_llama31_8b", 2048),
    ("window_shift_append_gemma2_2b", 2048),
    ("build_llama31_8b", 8192),
]
PLACEMENTS = 6
BALLAST_MB = (0, 96, 8, 200, 40, 136)


def main(argv: list[str]) -> None:
    size, pool, _ = probes.start(argv, 0 if "--small" in argv else 20)
    small = "--small" in argv
    print(f"{adapter_info()['implementation']}: {adapter_info()['device']}")
    copy = roofline.copy_kernel()
    ballast = []
    for variant, tokens in ROWS:
        for m in probes.measurements([variant], size, pool, decode=False):
            if not small and m.plan.tokens != tokens:
                continue
            cbufs, cparams = roofline.copy_buffers(m.nbytes)
            croof: dict = {}
            warm = 300
            for p in range(PLACEMENTS):
                mb = 1 if small else BALLAST_MB[p % len(BALLAST_MB)]
                if mb:
                    ballast.append(device().create_buffer(size=mb << 20, usage=0x80))
                reuse: dict = {}  # fresh device buffers for the kernel
                ks, cs = [], []
                for _ in range(3):
                    ts = time_kernel(
                        m.text, m.bufs, m.params, m.wg, bindings=m.kernel.bindings,
                        params_struct=m.kernel.params, repeats=30, warmup=warm, reuse=reuse,
                    )  # fmt: skip
                    ks.append(float(np.median(ts)) * 1e6)
                    ts = time_kernel(copy, cbufs, cparams, repeats=30, warmup=warm, reuse=croof)
                    cs.append(float(np.median(ts)) * 1e6)
                print(
                    f"{m.label:<44} placement {p} (+{mb:3d} MB) kernel "
                    + " ".join(f"{k:8.2f}" for k in ks)
                    + " us  copy "
                    + " ".join(f"{c:8.2f}" for c in cs)
                    + f" us  best {100 * min(cs) / min(ks):5.1f}%",
                    flush=True,
                )
            break


if __name__ == "__main__":
    main(sys.argv[1:])
