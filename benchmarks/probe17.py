"""Walk design probe 17 (H200): is the f16 rotary appends' gap their destination?

Probe 16 left one difference between the f16 append on the pair walk (88-89% of the copy) and
the f16 build on it (94-96%): the append writes a 2,048-row window into each head's 8,192-row
cache, the build a contiguous span. Here the emitted append kernels (vector and pair forms, and
the f32 append as a control) run the benchmark's 2,048-token append twice: into the benchmark's
8,192-row cache and into a 2,048-row cache, where the window is the whole cache and the
destination one contiguous span. The bytes moved are the same. Five rounds alternately with
the copy of those bytes, best kept, after 30 s of copies. The f16 build on the pair walk (its
2,048-token build, whatever the cache) runs in the same process as a control.
"""

from __future__ import annotations

import sys

import probes
from kvdsl import catalog

VARIANTS = [
    "merge_share_append_rotary_flat_f16_llama31_8b",
    "merge_share_append_rotary_flat_pairs_f16_llama31_8b",
    "merge_share_append_rotary_flat_llama31_8b",
    "build_rotary_flat_f16_in_llama31_8b",  # control: the f16 build on the pair walk
]


def main() -> None:
    size, pool, race = probes.start(sys.argv)
    for variant in VARIANTS:
        build = catalog.config(variant).mode == "build"
        caches = (size["cache"],) if build else (size["cache"], size["prefill"])
        for cache in caches:
            at = size | {"cache": cache}
            for m in probes.measurements([variant], at, pool, decode=False):
                if m.plan.tokens != size["prefill"]:
                    continue
                label = f"{m.label} cache={cache}"
                race.run(
                    label, m.kernel, {"emitted": (m.text, m.wg)}, m.bufs, m.params, m.nbytes, 5
                )


if __name__ == "__main__":
    main()
