"""Walk design probe: one BNSH cache copy (B=4, 8 heads, 8192 tokens, head dim 128) written with
different walks, timed on the GPU in one run. Tells which walk shapes reach the roofline.

    python benchmarks/probe.py [--small]
"""

from __future__ import annotations

import argparse
import os
import tempfile

import numpy as np

os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.gettempdir())

from kvdsl import catalog  # noqa: E402
from kvdsl.ir import Dispatch, KernelBuilder, f32, u32, vec  # noqa: E402
from kvdsl.kernels.copy import CopyConfig  # noqa: E402
from kvdsl.nodes.index import flat_index, workgroup_flat  # noqa: E402
from kvdsl.runtime import adapter_info, time_kernel  # noqa: E402

FOLD = 65535


def flat_vec4(per_thread: int, wg: int = 256):
    """One (or ``per_thread``) vec4 per invocation, workgroup-contiguous."""
    kb = KernelBuilder(f"flat_vec4_x{per_thread}", wg)
    src = kb.binding("src", vec(4, f32), "read")
    dst = kb.binding("dst", vec(4, f32), "read_write")
    n = kb.param("count")
    kb.workgroup_const("WG")
    w = workgroup_flat(kb, FOLD)
    base = kb.let("base", w * (wg * per_thread) + kb.lid.x)
    if per_thread == 1:
        with kb.if_(base < n):
            dst[base] = src[base]
    else:
        full = kb.let("full", base + (per_thread - 1) * wg < n)
        with kb.if_(full):
            xs = [kb.let(f"x{j}", src[base + j * wg]) for j in range(per_thread)]
            for j, x in enumerate(xs):
                dst[base + j * wg] = x
        with kb.else_():
            for j in range(per_thread):
                with kb.if_(base + j * wg < n):
                    dst[base + j * wg] = src[base + j * wg]
    return kb.build(Dispatch(n.node, wg * per_thread, FOLD)), "vec4"


def coop_unrolled(unroll: int, wg: int = 64, head_dim: int = 128):
    """Drop-in cooperative walk (f32 bindings, ceil(rows/WG) workgroups) with ``unroll`` loads
    in flight per lane on full tiles."""
    kb = KernelBuilder(f"coop_u{unroll}", wg)
    src = kb.binding("src", f32, "read")
    dst = kb.binding("dst", f32, "read_write")
    hd = kb.const("HEAD_DIM", u32, head_dim)
    WG = kb.workgroup_const("WG")
    rows = kb.param("count")
    w = workgroup_flat(kb, FOLD)
    base = kb.let("elemBase", w * (WG * hd))
    total = kb.let("totalElems", rows * hd)
    with kb.if_(base + WG * hd <= total):
        with kb.for_range("s", 0, hd, unroll) as s:
            e = kb.let("e", base + s * WG + kb.lid.x)
            xs = [kb.let(f"x{j}", src[e + j * wg]) for j in range(unroll)]
            for j, x in enumerate(xs):
                dst[e + j * wg] = x
    with kb.else_():
        with kb.for_range("s", 0, hd) as s:
            e = kb.let("e", base + s * WG + kb.lid.x)
            with kb.if_(e < total):
                dst[e] = src[e]
    return kb.build(Dispatch(rows.node, wg, FOLD)), "rows"


def per_row_vec4(wg: int = 64, head_dim: int = 128):
    kb = KernelBuilder("per_row_vec4", wg)
    src = kb.binding("src", vec(4, f32), "read")
    dst = kb.binding("dst", vec(4, f32), "read_write")
    hd = kb.const("HEAD_DIM_V4", u32, head_dim // 4)
    kb.workgroup_const("WG")
    rows = kb.param("count")
    i = flat_index(kb, FOLD, bound=rows)
    with kb.for_range("d", 0, hd) as d:
        dst[i * hd + d] = src[i * hd + d]
    return kb.build(Dispatch(rows.node, wg, FOLD)), "rows_vec4"


def catalog_copy(walk: str):
    k = catalog.build_config(CopyConfig(128, walk=walk))
    return k, "template_names"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", action="store_true")
    args = ap.parse_args()
    rows = 4 * 8 * (256 if args.small else 8192)
    n = rows * 128
    print(adapter_info()["device"], f"rows={rows} bytes moved={2 * 4 * n / 2**20:.0f} MiB")
    a = np.random.default_rng(0).random(n, np.float32)
    out = np.zeros_like(a)
    kernels = [flat_vec4(1), flat_vec4(4), flat_vec4(1, 64), flat_vec4(8)]
    kernels += [coop_unrolled(u) for u in (1, 4, 8, 16)]
    kernels += [coop_unrolled(8, 128), coop_unrolled(8, 256)]
    kernels += [per_row_vec4(), catalog_copy("cooperative"), catalog_copy("per_row")]
    floor = None
    for kernel, kind in kernels:
        if kind == "vec4":
            bufs, params = {"src": a, "dst": out}, {"count": n // 4}
        elif kind == "template_names":
            bufs = {"src_k": a, "src_v": a, "present_key": out, "present_value": out}
            params = {"count": rows}
        elif kind == "rows_vec4":
            bufs, params = {"src": a, "dst": out}, {"count": rows}
        else:
            bufs, params = {"src": a, "dst": out}, {"count": rows}
        t = float(np.median(time_kernel(kernel, bufs, params, repeats=30)))
        moved = 2 * 4 * n * (2 if kind == "template_names" else 1)
        gbs = moved / t / 1e9
        floor = floor or gbs
        print(f"{kernel.name:<22} {t * 1e6:9.1f} us {gbs:8.0f} GB/s {100 * gbs / floor:6.1f}%")


if __name__ == "__main__":
    main()
