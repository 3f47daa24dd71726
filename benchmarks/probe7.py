"""Walk design probe 7 (H200): do f16 data moves reach the copy with 16 bytes per invocation?

Run 5: the flat f16 moves (copy, merge, merge_share retain, window_shift) reach 85-91% of the
vec4 copy while their f32 forms reach 96-100%; one ``vec4<f16>`` is 8 bytes per invocation. A
move that never computes on its values can carry eight halves as one ``vec4<u32>``: the edited
form retypes the bindings, halves the ``*_V4`` consts (the index math is in vectors) and the
workgroups. Each form is first checked on the device to write the same bytes as the emitted
kernel, then timed alternately with it (three rounds, best kept) beside the two-pair copy.

The flat f16 moves are emitted as words since (``kvdsl.nodes.flat``), so the edit finds nothing
left to change and this probe stops at its first check: ``probe7.txt`` is its record.
"""

from __future__ import annotations

import math
import os
import re
import sys
import tempfile
from pathlib import Path

import numpy as np

os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.gettempdir())
sys.path.insert(0, str(Path(__file__).resolve().parent))

import roofline  # noqa: E402
from kvdsl import catalog  # noqa: E402
from kvdsl.emit import emit  # noqa: E402
from kvdsl.ir import workgroups  # noqa: E402
from kvdsl.runtime import device as gpu  # noqa: E402
from kvdsl.runtime import run_source, time_kernel  # noqa: E402
from plans import FULL, SMALL, Pool, element_sizes, plans, reshape  # noqa: E402

VARIANTS = [
    "copy_flat_f16_llama31_8b",
    "merge_flat_f16_llama31_8b",
    "merge_share_retain_flat_f16_llama31_8b",
    "window_shift_flat_f16_gemma2_2b",
]
V4_CONST = re.compile(r"const (\w+_V4): u32 = (\d+)u;")


def words(text: str) -> str:
    """``text`` moving eight halves per invocation as ``vec4<u32>`` (see the module doc)."""
    out = text.replace("array<vec4<f16>>", "array<vec4<u32>>")
    out = out.replace("vec4<f16>(0.0h, 0.0h, 0.0h, 0.0h)", "vec4<u32>(0u, 0u, 0u, 0u)")
    out = V4_CONST.sub(lambda m: f"const {m[1]}: u32 = {int(m[2]) // 2}u;", out)
    assert "vec4<f16>" not in out.split("enable f16;", 1)[1], "a value is computed on"
    return out


def halved(wg: tuple[int, int, int]) -> tuple[int, int, int]:
    assert wg[1] == wg[2] == 1, "a folded grid: halve by hand"
    return (math.ceil(wg[0] / 2), 1, 1)


def timed(kernel, text, wg, bufs, params, warmup, reuse) -> float:
    ts = time_kernel(
        text, bufs, params, wg, bindings=kernel.bindings, params_struct=kernel.params,
        repeats=30, warmup=warmup, label=kernel.name, reuse=reuse,
    )  # fmt: skip
    return float(np.median(ts)) * 1e6


def main() -> None:
    small = "--small" in sys.argv
    size = dict(SMALL if small else FULL) | {"batches": (2 if small else 4,)}
    gpu.configure({"max-storage-buffer-binding-size": 1 << 28, "max-buffer-size": 1 << 28})
    pool, reuse, roof_reuse = Pool(), {}, {}
    copy = roofline.copy_kernel()
    for variant in VARIANTS:
        cfg = reshape(catalog.config(variant))
        kernel = catalog.build_config(cfg, variant)
        text = emit(kernel)
        z = element_sizes(kernel)
        for plan in plans(cfg, size):
            bufs = pool.buffers(kernel.bindings, plan)
            params = plan.params_of(kernel.params)
            wg = workgroups(kernel, params)
            forms = {"vec4<f16>": (text, wg), "vec4<u32>": (words(text), halved(wg))}
            outs = [
                run_source(t, kernel.bindings, kernel.params, dict(bufs), params, w)
                for t, w in forms.values()
            ]
            for b in outs[0]:
                assert np.array_equal(outs[0][b].view(np.uint16), outs[1][b].view(np.uint16)), b
            cbufs, cparams = roofline.copy_buffers(plan.moved(z))
            best: dict[str, float] = {}
            for _ in range(3):
                for name, (t, w) in forms.items():
                    us = timed(kernel, t, w, bufs, params, 300, reuse)
                    best[name] = min(best.get(name, us), us)
                us = float(np.median(time_kernel(copy, cbufs, cparams, repeats=30, warmup=300,
                                                 reuse=roof_reuse))) * 1e6  # fmt: skip
                best["copy"] = min(best.get("copy", us), us)
            for name, us in best.items():
                pct = 100 * best["copy"] / us
                print(f"{variant:<40} tok={plan.tokens:<5} {name:<10} {us:9.2f} us {pct:5.0f}% copy",
                      flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
