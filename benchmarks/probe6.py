"""Walk design probe 6 (H200): does issuing every load before the flat K RMSNorm's barrier pay?

The flat walk's K RMSNorm loads K, reduces the row's sum of squares in workgroup memory (a
barrier), then loads what the rest of the row program needs (K again, the norm weight, V, the
rotary partner, cos/sin, scales, ``seqlens_k``) and stores: two memory round trips with a barrier
between. The edited form issues every load that does not depend on the norm before the barrier,
so one round trip remains. Each kernel is timed as emitted and edited, alternately (three rounds,
best kept), at the benchmark's batch-4 sizes, beside the two-pair vec4 copy of the same bytes.
"""

from __future__ import annotations

import dataclasses
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
from kvdsl.runtime import time_kernel  # noqa: E402
from plans import FULL, SMALL, Pool, element_sizes, plans, reshape  # noqa: E402

VARIANTS = [
    "build_knorm_flat_qwen3_06b",
    "build_knorm_rotary_flat_qwen3_06b",
    "build_quant_int4_knorm_flat_qwen3_06b",
    "build_quant_int8_knorm_flat_qwen3_06b",
    "append_quant_int4_knorm_flat_qwen3_06b",
    "append_quant_int8_knorm_flat_qwen3_06b",
]
GUARD = "  if (e >= items) {\n    return;\n  }\n"
SKIP = "  if (t < skip) {\n    return;\n  }\n"
NORMED = re.compile(r"  let (\w+) = src_k\[(.+?)\] \* invRms \* k_norm_weight\[(.+?)\];$")


def hoisted(text: str) -> str:
    """``text`` with every load that does not need ``invRms`` moved above the reduction."""
    head, tail = text.split("  // K RMSNorm", 1)
    reduction, rest = tail.split(GUARD, 1)
    guard = "  if (e >= items) {\n    return;\n  }\n"
    up: list[str] = []
    if SKIP in rest:
        rest = rest.replace(SKIP, "  let skipped = t < skip;\n")
        guard = "  if (e >= items || skipped) {\n    return;\n  }\n"
    body = rest.rstrip()
    assert body.endswith("}")
    down, staying, n = [], {"invRms"}, 0
    for line in body[:-1].rstrip().splitlines():
        m = NORMED.match(line)
        if m:
            name, i, w = m.groups()
            up += [f"  let {name}R = src_k[{i}];", f"  let {name}W = k_norm_weight[{w}];"]
            down.append(f"  let {name} = {name}R * invRms * {name}W;")
            staying.add(name)
        elif line.strip().startswith("//"):
            down.append(line)
        elif line.startswith("  let "):
            name = line.split()[1].rstrip(":")
            if any(re.search(rf"\b{s}\b", line) for s in staying):
                down.append(line)
                staying.add(name)
            else:
                up.append(line)
        elif line.startswith("  present_"):
            lhs, rhs = line.split(" = ", 1)
            if any(re.search(rf"\b{s}\b", rhs) for s in staying):
                down.append(line)
            else:
                n += 1
                up.append(f"  let hoisted{n} = {rhs}")
                down.append(f"{lhs} = hoisted{n};")
        else:
            raise ValueError(f"unexpected line: {line!r}")
    return head + "\n".join(up) + "\n  // K RMSNorm" + reduction + guard + "\n".join(down) + "\n}\n"


def timed(kernel, wgsl, bufs, params, warmup, reuse):
    wg = workgroups(kernel, params)
    ts = time_kernel(
        wgsl, bufs, params, wg, bindings=kernel.bindings, params_struct=kernel.params,
        repeats=30, warmup=warmup, label=kernel.name, reuse=reuse,
    )  # fmt: skip
    return float(np.median(ts)) * 1e6


def main() -> None:
    small = "--small" in sys.argv
    size = dict(SMALL if small else FULL) | {"batches": (2 if small else 4,)}
    # The 8,192-token rows' copy binds 134 MB buffers, just past the 128 MiB default.
    gpu.configure({"max-storage-buffer-binding-size": 1 << 28, "max-buffer-size": 1 << 28})
    pool, reuse, roof_reuse = Pool(), {}, {}
    copy = roofline.copy_kernel()
    for variant in VARIANTS:
        cfg = reshape(catalog.config(variant))
        kernel = catalog.build_config(cfg, variant)
        forms = {"as emitted": (kernel, emit(kernel))}
        forms["loads first"] = (kernel, hoisted(emit(kernel)))
        if "--workgroups" in sys.argv:  # the same kernels with smaller workgroups
            for wg in (64, 128):
                k = catalog.build_config(dataclasses.replace(cfg, workgroup_size=wg), variant)
                forms[f"WG {wg}"] = (k, emit(k))
                forms[f"WG {wg} first"] = (k, hoisted(emit(k)))
        z = element_sizes(kernel)
        for plan in plans(cfg, size):
            bufs = pool.buffers(kernel.bindings, plan)
            params = plan.params_of(kernel.params)
            nbytes = plan.moved(z)
            cbufs, cparams = roofline.copy_buffers(nbytes)
            warmup = 2000 if plan.tokens == 1 else 300
            best: dict[str, float] = {}
            for _ in range(3):
                for name, (k, text) in forms.items():
                    us = timed(k, text, bufs, params, warmup, reuse)
                    best[name] = min(best.get(name, us), us)
                us = float(np.median(time_kernel(copy, cbufs, cparams, repeats=30, warmup=warmup,
                                                 reuse=roof_reuse))) * 1e6  # fmt: skip
                best["copy"] = min(best.get("copy", us), us)
            for name, us in best.items():
                pct = 100 * best["copy"] / us
                print(f"{variant:<42} tok={plan.tokens:<5} {name:<12} {us:9.2f} us {pct:5.0f}% copy",
                      flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
