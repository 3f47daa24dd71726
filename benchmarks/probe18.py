"""Walk design probe 18 (H200): the cost of the 2D fold past 65,535 workgroups.

A flat kernel indexes ``e = gid.x + gid.y * 65535u * WG``, and its dispatch rule puts exactly
65,535 workgroups in x whenever y > 1: a dispatch of 65,536 workgroups launches 131,070. The
extra ones of a guarded walk return at once; those of an unguarded one (K RMSNorm: no return
before the barrier) clamp their row and load and reduce it like any other. The benchmark's
sizes stay under the fold at 256 invocations per workgroup (batch 8 of 8,192 tokens would not);
here the same kernels at 128 (65,536 workgroups at batch 4, 8,192 tokens) show it: the emitted
kernel against a *balanced* fold, ``e = gid.x + gid.y * nwg.x * WG`` with
``@builtin(num_workgroups)`` and the groups split evenly over y rows (x = ceil(n / y)), checked
to write the same bytes, and the emitted kernel at 256 (no fold). Five rounds alternately with
the copy, best kept, after 30 s of copies. The flat walks emit the balanced form since this
probe (``probe18.txt`` is its record), so it now rebuilds the folded form from the emitted one.
"""

from __future__ import annotations

import dataclasses
import math
import re
import sys

import numpy as np

import probes
from kvdsl import catalog
from kvdsl.emit import emit
from kvdsl.runtime import run_source

VARIANTS = ["build_knorm_flat_sg_qwen3_06b", "build_flat_llama31_8b", "build_knorm_flat_qwen3_06b"]
GID = "@builtin(global_invocation_id) gid: vec3<u32>"


def balanced(text: str) -> str:
    """The folded form with the balanced index (what the flat walks emit since this probe)."""
    out = text.replace(GID, GID + ", @builtin(num_workgroups) nwg: vec3<u32>", 1)
    out, n = re.subn(r"gid\.y \* \d+u \* WG", "gid.y * nwg.x * WG", out)
    assert n == 1
    return out


def folded(text: str, fold: int) -> str:
    """The emitted (balanced) form with the template's index ``gid.y * fold * WG`` again."""
    out = re.sub(r",?\s*@builtin\(num_workgroups\) nwg: vec3<u32>", "", text, count=1)
    out, n = re.subn(r"gid\.y \* nwg\.x \* WG", f"gid.y * {fold}u * WG", out)
    assert n == 1
    return out


def main() -> None:
    size, pool, race = probes.start(sys.argv)
    # llvmpipe's sizes do not pass 65,535 workgroups: fold them at 4 there
    fold = 4 if "--small" in sys.argv else 65535
    for variant in VARIANTS:
        for m in probes.measurements([variant], size, pool, decode=False):
            if m.plan.tokens != size["cache"]:
                continue
            k128 = catalog.build_config(dataclasses.replace(m.cfg, workgroup_size=128), variant)
            text = emit(k128)
            items = math.ceil(m.wg[0] * m.wg[1] * m.cfg.workgroup_size / 128)
            y = math.ceil(items / fold)
            template = (fold, y, 1) if y > 1 else (items, 1, 1)
            even = (math.ceil(items / y), y, 1)
            if "nwg.x" in text:  # the flat walks are balanced now: rebuild the folded form
                old, new = folded(text, fold), text
            else:
                old, new = text, balanced(text)
            print(f"{m.label}: {items} workgroups of 128: {template} or {even}", flush=True)
            forms = {"wg128": (old, template), "balanced": (new, even), "wg256": (m.text, m.wg)}
            outs = [
                run_source(t, m.kernel.bindings, m.kernel.params, dict(m.bufs), m.params, w)
                for t, w in forms.values()
            ]
            for b in outs[0]:
                for name, out in zip(list(forms)[1:], outs[1:]):
                    eq = outs[0][b].view(np.uint32) == out[b].view(np.uint32)
                    print(f"{m.label} {name} {b}: {100 * eq.mean():.3f}% equal", flush=True)
            race.run(m.label, k128, forms, m.bufs, m.params, m.nbytes, 5)


if __name__ == "__main__":
    main()
