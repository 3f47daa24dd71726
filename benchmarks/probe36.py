"""Probe 36 (H200): the unrotated appends' new vectors loaded before the append window.

An append finds its cache row from ``seqlens_k[b]`` and leaves for the new tokens that do not
fit (``if (!(t < skip))``). The appends loaded their new K and V vectors (and the quantising
ones their scales) inside that guard, so each step of the walk made two dependent memory round
trips: ``seqlens_k``, then the vectors. The drop-ins' decode appends at batch 4 walk four steps
in one workgroup (the template's dispatch) and took 1.6-2.0x the empty dispatch. Without
rotary no load needs the cache row: the *early* form loads the vectors (and scales) first and
leaves after them (``kvdsl.nodes.flat.EARLY_LOADS``), so both loads travel together. The
*late* form is the emitted kernel before this probe (``EARLY_LOADS = False``, byte for byte
the WGSL of commit 294573f). Rotary appends are not changed: their cos/sin loads need the row.

Every unrotated append representative, drop-ins and flat, at batches 4 and 1 and 1 and 2,048
tokens; both forms checked to write the same bytes on the device, then timed alternately with
the copy, five rounds, best kept, after 20 s of copies.

Result (``results/h200/probe36.txt``, ``probe36-dawn.txt``; one call, both implementations):
the same bytes everywhere, and no row moved beyond the call's noise. The drop-ins' decode
appends at batch 4 under wgpu-native: 6.78 → 6.75 µs (merge_share), 6.64 → 6.72 (per row),
7.02 → 7.07 (window_shift), 8.18 → 8.11 (int8), 8.78 → 8.37 (int4); at 2,048 tokens within 2%
either way except the int4 drop-in (-1.5% at batch 4, -3.9% at batch 1). Under Dawn 32 of 40
rows within 1.5%; of the rest, six at one token (-2.5% to +6.9%, where the call's noise is that
large) and the int4 drop-in at 2,048 tokens, batch 1 (-3.3%). The int4 rows alone gained
somewhat under both (up to 5.7%), and lost 5% at one token, batch 1, under wgpu-native; no
target row would pass. The driver does not wait on the window's load before issuing the
vectors': the dependent round trip was not what the decode appends pay for. The
early form stays at the record commit dc82139 (``flat.EARLY_LOADS``); run this probe with that
commit's ``kvdsl`` on the path (``git archive dc82139 kvdsl | tar -x -C p36``, then
``PYTHONPATH=$PWD/p36:$PYTHONPATH python3 benchmarks/probe36.py``).

    python benchmarks/probe36.py [--small]
"""

from __future__ import annotations

import sys

import probes
from kvdsl.nodes import flat
from kvdsl.runtime import adapter_info

VARIANTS = [
    "merge_share_append_llama31_8b",
    "merge_share_append_per_row_llama31_8b",
    "merge_share_append_hybrid_llama31_8b",
    "window_shift_append_gemma2_2b",
    "append_quant_int8_llama31_8b",
    "append_quant_int4_llama31_8b",
    "merge_share_append_flat_llama31_8b",
    "window_shift_append_flat_gemma2_2b",
    "append_quant_int8_flat_llama31_8b",
    "append_quant_int4_flat_llama31_8b",
]


def main(argv: list[str]) -> None:
    size, pool, race = probes.start(argv, 0 if "--small" in argv else 20)
    size["batches"] = (4, 1)
    print(f"{adapter_info()['implementation']}: {adapter_info()['device']}")
    for m in probes.measurements(VARIANTS, size, pool):
        late = probes.emit_with(m, flat, EARLY_LOADS=False)
        assert late != m.text, f"{m.variant}: the two forms are one"
        probes.same_bytes(m, late, m.text)
        forms = {"late": (late, m.wg), "early": (m.text, m.wg)}
        race.run(f"{m.label} B={m.plan.batch}", m.kernel, forms, m.bufs, m.params, m.nbytes, 5)


if __name__ == "__main__":
    main(sys.argv[1:])
