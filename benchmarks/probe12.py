"""Walk design probe 12 (H200): what holds the flat f16 rotary appends at 82-89% of the copy?

Probe 11 ruled out the load order. Ceilings, not kernels (their outputs are not checked): the
emitted kernel timed alternately with (a) *no table*: cos/sin from registers instead of the f32
tables; (b) *no rotation*: K stored as loaded (no partner load, no table). Where (a) reaches
the f32 appends' 91-97%, the table reads are the cost; where only (b) does, the partner load.
Five rounds, best kept, beside the copy, after 30 s of copies.
"""

from __future__ import annotations

import re
import sys

import probes
from kvdsl import catalog
from kvdsl.emit import emit
from kvdsl.ir import workgroups
from plans import Pool, element_sizes, plans, reshape

VARIANTS = [
    "merge_share_append_rotary_flat_f16_llama31_8b",
    "merge_share_append_rotary_flat_pairs_f16_llama31_8b",
    "window_shift_append_rotary_flat_f16_gemma2_2b",
    "merge_share_append_rotary_flat_llama31_8b",
]
TABLE = re.compile(r"^  let (cs|sn) = (cos|sin)_cache\[.*\];$", re.MULTILINE)
PARTNER = re.compile(r"^  let x1 = .*;$", re.MULTILINE)


def no_table(text: str) -> str:
    out = TABLE.sub(lambda m: f"  let {m[1]} = vec4<f32>(f32(dr) * 0.01f);", text)
    out = out.replace(
        "@binding(3) var<storage, read> cos_cache", "@binding(3) var<storage, read> cos_unused"
    )
    return out


def no_rotation(text: str) -> str:
    out = no_table(text)
    out = PARTNER.sub("  let x1 = x0;", out)
    return out


def main() -> None:
    size = probes.sizes(sys.argv)
    if "--small" not in sys.argv:
        probes.settle(30.0)
    pool, race = Pool(), probes.Race()
    for variant in VARIANTS:
        cfg = reshape(catalog.config(variant))
        kernel = catalog.build_config(cfg, variant)
        text = emit(kernel)
        z = element_sizes(kernel)
        for plan in plans(cfg, size):
            if plan.tokens == 1:
                continue
            bufs = pool.buffers(kernel.bindings, plan)
            params = plan.params_of(kernel.params)
            wg = workgroups(kernel, params)
            forms = {"emitted": (text, wg), "no table": (no_table(text), wg)}
            forms["no rotate"] = (no_rotation(text), wg)
            race.run(f"{variant} tok={plan.tokens}", kernel, forms, bufs, params, plan.moved(z), 5)


if __name__ == "__main__":
    main()
