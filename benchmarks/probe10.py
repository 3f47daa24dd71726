"""Walk design probe 10 (H200): the pair walk against the vector walk, as kvdsl builds them.

Run 7 measured the f16 rotary appends in the pair walk at 1 token slower than run 6's vector
walk in one run (``window_shift`` 6.6 vs 5.3 µs) and as fast in another; a single row per run
cannot tell a kernel from the GPU's state. Here both forms (``pairs=True`` / ``pairs=False`` of
the same config) are first checked to write the same bytes, then timed alternately, five rounds,
best kept, beside the copy, at 1 and 2,048 new tokens (``--twice``: all of it twice). Result
(``probe10.txt``): pairs win at 2,048 tokens and lose ~0.2 µs at 1, so the appends keep the
vector walk by default and the ``*_pairs_*`` variants serve prefill.
"""

from __future__ import annotations

import dataclasses
import sys

import numpy as np

import probes
from kvdsl import catalog
from kvdsl.emit import emit
from kvdsl.ir import workgroups
from kvdsl.kernels import build, merge_share, window_shift
from kvdsl.runtime import run_source
from plans import Pool, element_sizes, plans, reshape

BUILDERS = {
    "build_rotary_flat_f16_in_llama31_8b": build.build,
    "merge_share_append_rotary_flat_f16_llama31_8b": merge_share.merge_share,
    "window_shift_append_rotary_flat_f16_gemma2_2b": window_shift.window_shift,
}


def main() -> None:
    size = probes.sizes(sys.argv)
    pool, race = Pool(), probes.Race()
    for _ in range(2 if "--twice" in sys.argv else 1):
        for variant, make in BUILDERS.items():
            cfg = reshape(catalog.config(variant))
            kernels = {
                "vector": make(dataclasses.replace(cfg, pairs=False), variant),
                "pair": make(dataclasses.replace(cfg, pairs=True), variant),
            }
            z = element_sizes(kernels["pair"])
            for plan in plans(cfg, size):
                bufs = pool.buffers(kernels["pair"].bindings, plan)
                params = plan.params_of(kernels["pair"].params)
                forms = {n: (emit(k), workgroups(k, params)) for n, k in kernels.items()}
                outs = [
                    run_source(t, k.bindings, k.params, dict(bufs), params, w)
                    for k, (t, w) in zip(kernels.values(), forms.values())
                ]
                for b in outs[0]:
                    assert np.array_equal(outs[0][b].view(np.uint8), outs[1][b].view(np.uint8)), b
                label = f"{variant} tok={plan.tokens}"
                race.run(label, kernels["pair"], forms, bufs, params, plan.moved(z), rounds=5)


if __name__ == "__main__":
    main()
