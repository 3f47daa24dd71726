"""Probe 25 (H200): the drop-in rotary kernels walking rotary pairs instead of vectors.

A drop-in keeps the template's dispatch, so its lanes per workgroup are fixed (256, probe 24)
and its steps are the block's items over them: one invocation per rotary pair (``flat.pair_walk``,
which loads ``x0``, ``x1`` and cos/sin once and stores both rotated vectors) halves the steps of
a lane and the loads of K, where the per-vector walk loads each vector and its partner. The flat
walk keeps vectors for its f16 appends (pairs cost ~0.2 µs of ~5.6 at one token there: half the
invocations); in the block walk the invocations stay, so pairs should not cost decode. This
builds each drop-in rotary variant with its vector walk and with pairs (``flat._pairs`` made
true for a rotary template walk), checks on the device that both write the same bytes, and
times them alternately with the copy, three rounds, best kept, after 20 s of copies.

    python benchmarks/probe25.py [--small]
"""

from __future__ import annotations

import sys

import probes
from kvdsl.nodes import flat
from kvdsl.runtime import adapter_info

VARIANTS = [
    "merge_share_append_rotary_llama31_8b",
    "merge_share_append_rotary_hybrid_llama31_8b",
    "merge_share_append_rotary_per_row_llama31_8b",
    "merge_share_append_rotary_f16_llama31_8b",
    "merge_share_append_rotary_per_row_f16_llama31_8b",
    "window_shift_append_rotary_llama31_8b",
    "window_shift_append_rotary_f16_gemma2_2b",
    "build_rotary_llama31_8b",
    "build_rotary_f16_llama31_8b",
    "build_quant_int8_rotary_llama31_8b",
    "build_quant_int4_rotary_llama31_8b",
]
FORMS = ("vector", "pairs")
PAIRS = flat._pairs


def policy(pairs: bool):
    """``flat._pairs`` answering ``pairs`` for every rotary template walk the pair walk serves
    (the vector form is the walk these variants had before this probe)."""

    def chosen(cfg) -> bool:
        if cfg.walk in flat.TEMPLATE_WALKS and cfg.rotary and flat.pairs_apply(cfg):
            return pairs
        return PAIRS(cfg)

    return chosen


def main(argv: list[str]) -> None:
    size, pool, race = probes.start(argv, 0 if "--small" in argv else 20)
    print(f"{adapter_info()['implementation']}: {adapter_info()['device']}")
    for m in probes.measurements(VARIANTS, size, pool):
        texts = {k: probes.emit_with(m, flat, _pairs=policy(k == "pairs")) for k in FORMS}
        assert texts["vector"] != texts["pairs"], m.variant
        probes.same_bytes(m, texts["vector"], texts["pairs"])
        forms = {name: (text, m.wg) for name, text in texts.items()}
        race.run(m.label, m.kernel, forms, m.bufs, m.params, m.nbytes, 3)


if __name__ == "__main__":
    main(sys.argv[1:])
