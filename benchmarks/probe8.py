"""Walk design probe 8 (H200): does a subgroup reduction lift the flat K RMSNorm kernels?

Run 5: with every load before the barrier (probe 6) the flat K RMSNorm kernels still reach only
72-87% of the copy (int4 ~40 us at 65,536 rows whatever they write): each invocation writes its
partial to workgroup memory, waits at a barrier and reads the row's 32 partials back. A row is
32 invocations, one subgroup on NVIDIA, so a butterfly of ``subgroupShuffleXor`` (5 steps) sums
the row in registers with no barrier. Forms, each timed alternately with the emitted kernel
(three rounds, best kept) beside the two-pair copy:

- ``subgroup``: the butterfly over ``min(subgroup_size, 32)`` lanes, then, only where subgroups are
  narrower than a row (a uniform branch: llvmpipe's are 8 wide), the subgroups' partials through
  workgroup memory. Checked first to write what the emitted kernel writes (floats to 1e-5,
  quantised codes one step in <= 1% of words).
- ``sg+barrier``: the butterfly, then always the barrier and the ``32 / subgroup_size`` reads:
  what the barrier alone costs.
- ``no norm``: the reduction dropped (wrong values, not checked): the ceiling.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import numpy as np

os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.gettempdir())
sys.path.insert(0, str(Path(__file__).resolve().parent))

import probes  # noqa: E402
from kvdsl import catalog  # noqa: E402
from kvdsl.emit import emit  # noqa: E402
from kvdsl.ir import workgroups  # noqa: E402
from kvdsl.runtime import run_source  # noqa: E402
from plans import Pool, element_sizes, plans, reshape  # noqa: E402

VARIANTS = [
    "build_quant_int4_knorm_flat_qwen3_06b",
    "build_quant_int8_knorm_flat_qwen3_06b",
    "build_knorm_rotary_flat_qwen3_06b",
    "build_knorm_flat_qwen3_06b",
    "append_quant_int4_knorm_flat_qwen3_06b",
    "append_quant_int8_knorm_flat_qwen3_06b",
]
START = "  wsum[lid.x] = dot(kOwn, kOwn);\n"
END = "  ms = ms + ms1 + (ms2 + ms3);\n"
BUTTERFLY = """  var ms = dot(kOwn, kOwn);
  for (var m: u32 = 1u; m < min(sg, HEAD_DIM_V4); m = m << 1u) {
    ms = ms + subgroupShuffleXor(ms, m);
  }
"""
PARTIALS = """    wsum[lid.x] = ms;
    workgroupBarrier();
    var total: f32 = 0.0f;
    for (var j: u32 = 0u; j < HEAD_DIM_V4; j = j + sg) {
      total = total + wsum[lid.x - d4 + j];
    }
    ms = total;
"""


def edited(text: str, reduction: str) -> str:
    """``text`` with its row reduction replaced by ``reduction`` and subgroups enabled."""
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    head = head.replace("struct Params", "enable subgroups;\n\nstruct Params", 1)
    head = head.replace(
        "  @builtin(local_invocation_id) lid: vec3<u32>,\n",
        "  @builtin(local_invocation_id) lid: vec3<u32>,\n  @builtin(subgroup_size) sg: u32,\n",
    )
    return head + reduction + tail


FORMS = {
    "subgroup": BUTTERFLY + "  if (sg < HEAD_DIM_V4) {\n" + PARTIALS + "  }\n",
    "sg+barrier": BUTTERFLY + "  {\n" + PARTIALS + "  }\n",
    "no norm": "  let ms = dot(kOwn, kOwn) * f32(HEAD_DIM_V4);\n",
}


def same(a: np.ndarray, b: np.ndarray) -> bool:
    """Floats within 1e-5; integer words equal but for <= 1% (one-step code moves)."""
    if a.dtype.kind == "f":
        return bool(np.allclose(a, b, rtol=1e-5, atol=1e-6))
    return float(np.mean(a != b)) <= 0.01


def main() -> None:
    size = probes.sizes(sys.argv)
    pool, race = Pool(), probes.Race()
    for variant in VARIANTS:
        cfg = reshape(catalog.config(variant))
        kernel = catalog.build_config(cfg, variant)
        text = emit(kernel)
        forms = {"emitted": text} | {name: edited(text, r) for name, r in FORMS.items()}
        z = element_sizes(kernel)
        for plan in plans(cfg, size):
            bufs = pool.buffers(kernel.bindings, plan)
            params = plan.params_of(kernel.params)
            wg = workgroups(kernel, params)
            outs = {
                name: run_source(
                    forms[name], kernel.bindings, kernel.params, dict(bufs), params, wg
                )
                for name in ("emitted", "subgroup")
            }
            for b, want in outs["emitted"].items():
                assert same(want, outs["subgroup"][b]), (variant, b)
            timed = {name: (t, wg) for name, t in forms.items()}
            race.run(f"{variant} tok={plan.tokens}", kernel, timed, bufs, params, plan.moved(z))


if __name__ == "__main__":
    main()
