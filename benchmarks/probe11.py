"""Walk design probe 11 (H200): do the flat rotary appends pay for loading after the window?

The flat ``merge_share`` / ``window_shift`` appends load ``seqlens_k[b]``, work out the window
(``skip``, the destination row) and return the invocations whose token does not fit, and only
then load K and V: two memory round trips in a row, as the K RMSNorm kernels had before probe 6.
K and V do not depend on the window (their source row is the new token's, always in range), so
the *loads first* form issues them before the ``seqlens_k`` load. The f16 appends reach 82-89%
of the copy (runs 9-10), the f32 ones 95-97%. Each form is checked to write the bytes the
emitted kernel writes, then timed alternately (five rounds, best kept) beside the copy, after
30 s of copies (``--small``: llvmpipe sizes, no settling).
"""

from __future__ import annotations

import re
import sys

import numpy as np

import probes
from kvdsl import catalog
from kvdsl.emit import emit
from kvdsl.ir import workgroups
from kvdsl.runtime import run_source
from plans import Pool, element_sizes, plans, reshape

VARIANTS = [
    "merge_share_append_rotary_flat_f16_llama31_8b",
    "merge_share_append_rotary_flat_pairs_f16_llama31_8b",
    "window_shift_append_rotary_flat_f16_gemma2_2b",
    "window_shift_append_rotary_flat_pairs_f16_gemma2_2b",
    "merge_share_append_rotary_flat_llama31_8b",
]
ANCHOR = "  let total = u32(max(seqlens_k[b], -1i)) + 1u;\n"
MOVED = re.compile(r"^  let (nSrc|dr|x0|x1|v0|v1) = .*\n|^  // (NeoX|Appended K).*\n", re.MULTILINE)
V_STORE = "  present_value[dst] = new_v[nSrc + d4];\n"


def loads_first(text: str) -> str:
    """``text`` with the K/V loads (and the index math they need) above the window."""
    assert ANCHOR in text, "the emitted kernel changed"
    head, tail = text.split(ANCHOR, 1)
    moved = [m.group(0) for m in MOVED.finditer(tail) if not m.group(0).startswith("  //")]
    tail = MOVED.sub(lambda m: m.group(0) if m.group(0).startswith("  //") else "", tail)
    if V_STORE in tail:
        moved.append("  let vOwn = new_v[nSrc + d4];\n")
        tail = tail.replace(V_STORE, "  present_value[dst] = vOwn;\n")
    if "let d4 = " not in head and any(line.startswith("  let dr = d4") for line in moved):
        raise ValueError("dr needs d4")
    return head + "".join(moved) + ANCHOR + tail


def main() -> None:
    size = probes.sizes(sys.argv)
    if "--small" not in sys.argv:
        probes.settle(30.0)
    pool, race = Pool(), probes.Race()
    for variant in VARIANTS:
        cfg = reshape(catalog.config(variant))
        kernel = catalog.build_config(cfg, variant)
        text = emit(kernel)
        forms_text = {"emitted": text, "loads 1st": loads_first(text)}
        z = element_sizes(kernel)
        for plan in plans(cfg, size):
            bufs = pool.buffers(kernel.bindings, plan)
            params = plan.params_of(kernel.params)
            wg = workgroups(kernel, params)
            outs = [
                run_source(t, kernel.bindings, kernel.params, dict(bufs), params, wg)
                for t in forms_text.values()
            ]
            for b in outs[0]:
                assert np.array_equal(outs[0][b].view(np.uint8), outs[1][b].view(np.uint8)), b
            forms = {n: (t, wg) for n, t in forms_text.items()}
            race.run(f"{variant} tok={plan.tokens}", kernel, forms, bufs, params, plan.moved(z), 5)


if __name__ == "__main__":
    main()
