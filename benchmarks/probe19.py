"""Probe 19 (H200): the roofline copy under Dawn.

Under Dawn (``KVDSL_WEBGPU=dawn``) the first benchmark call timed the roofline copy of 536 MB
at 332 µs (1.6 TB/s) where the catalog's flat copy of the same bytes took 134 µs (4.0 TB/s);
under wgpu-native the two agree. The two kernels differ in three ways: the copy's index
(``gid.y * 65535u * WG``, the template's fold, where the flat walks read ``nwg.x``), its guard
(``i >= count`` against ``e >= count * HEAD_DIM_V4``) and its buffers (``np.ones`` against the
benchmark pool's random values). This races, alternately with the emitted copy on its own
buffers (``copy``): the emitted copy on random buffers (``random``), the copy with the balanced
index (``balanced``), with no fold at all (``unfolded``), and the flat copy's WGSL
(``flat_copy``), each on the same random buffers.

    [KVDSL_WEBGPU=dawn] python benchmarks/probe19.py [--small]
"""

from __future__ import annotations

import sys

import numpy as np

import probes
import roofline
from kvdsl.emit import emit
from kvdsl.ir import workgroups
from kvdsl.runtime import adapter_info
from probe18 import balanced


def main(argv: list[str]) -> None:
    small = "--small" in argv
    nbytes = 1 << (20 if small else 29)
    size, pool, race = probes.start(argv, 0 if small else 20)
    print(f"{adapter_info()['implementation']}: {adapter_info()['device']}, {nbytes} B")
    kernel = race.copy
    text = emit(kernel)
    ones, params = roofline.copy_buffers(nbytes)
    rng = np.random.default_rng(0)
    bufs = {k: rng.standard_normal(v.size).astype(np.float32) for k, v in ones.items()}
    wg = workgroups(kernel, params)
    flat = emit(probes.catalog.build_config(probes.catalog.config("copy_flat_llama31_8b"), "c"))
    flat_params = dict(params, count=params["count"] // 32)
    forms = {
        "random": (text, wg),
        "balanced": (balanced(text), wg),
        "unfolded": (text.replace("gid.x + gid.y * 65535u * WG", "gid.x"), wg),
    }
    race.run("roofline copy", kernel, forms, bufs, params, nbytes, rounds=3)
    race.run("flat copy text", kernel, {"flat_copy": (flat, wg)}, bufs, flat_params, nbytes)


if __name__ == "__main__":
    main(sys.argv[1:])
