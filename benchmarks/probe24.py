"""Probe 24 (H200): the block walk's invocations per workgroup and steps per loop trip.

The drop-ins keep the template's dispatch, so each lane walks up to ``per_row`` steps of its
workgroup's rows; a step loads and stores, and the GPU cannot issue the next step's loads before
this step's stores; and at 64 invocations per workgroup a 2,048-token prefill runs two warps
per workgroup, a sixth of the GPU's warp slots. This builds each variant with
``flat.BLOCK_LANES`` (invocations per workgroup, the template's 64 or 256) and
``flat.BLOCK_STEPS`` (steps per trip, :mod:`kvdsl.ir.interleave`), checks on the device that
every form writes the bytes of the template's shape (64 lanes, 1 step), and times them
alternately with the copy, three rounds, best kept, after 20 s of copies.

Run 28's first call (``probe24.txt``, an earlier form of this probe: steps 1, 2, 4, 8 at 64
lanes) found steps per trip alone worth little: decode 5-20% faster, prefill within ±3%.

    python benchmarks/probe24.py [--small]
"""

from __future__ import annotations

import sys

import probes
from kvdsl import catalog
from kvdsl.emit import emit
from kvdsl.nodes import flat
from kvdsl.runtime import adapter_info

VARIANTS = [
    "copy_llama31_8b",
    "copy_f16_llama31_8b",
    "merge_llama31_8b",
    "merge_share_append_llama31_8b",
    "merge_share_append_rotary_llama31_8b",
    "merge_share_append_rotary_f16_llama31_8b",
    "window_shift_llama31_8b",
    "window_shift_append_rotary_llama31_8b",
    "build_rotary_llama31_8b",
    "build_quant_int8_llama31_8b",
    "build_quant_int4_rotary_llama31_8b",
    "append_quant_int8_llama31_8b",
    "append_quant_int4_llama31_8b",
    "build_knorm_rotary_qwen3_06b",
    "append_quant_int8_knorm_qwen3_06b",
]
FORMS = {"64x1": (64, 1), "256x1": (256, 1), "256x2": (256, 2), "256x4": (256, 4)}


def form(m: probes.Measurement, lanes: int, steps: int) -> str:
    """``m``'s kernel built with at most ``lanes`` invocations per workgroup and ``steps`` steps
    per trip (the same interface and dispatch)."""
    default = flat.BLOCK_LANES, flat.BLOCK_STEPS
    flat.BLOCK_LANES, flat.BLOCK_STEPS = lanes, steps
    try:
        return emit(catalog.build_config(m.cfg, m.variant))
    finally:
        flat.BLOCK_LANES, flat.BLOCK_STEPS = default


def main(argv: list[str]) -> None:
    size, pool, race = probes.start(argv, 0 if "--small" in argv else 20)
    print(f"{adapter_info()['implementation']}: {adapter_info()['device']}")
    for m in probes.measurements(VARIANTS, size, pool):
        texts = {name: form(m, *shape) for name, shape in FORMS.items()}
        for name, text in texts.items():
            if name != "64x1":
                probes.same_bytes(m, texts["64x1"], text)
        forms = {name: (text, m.wg) for name, text in texts.items()}
        race.run(m.label, m.kernel, forms, m.bufs, m.params, m.nbytes, 3)


if __name__ == "__main__":
    main(sys.argv[1:])
