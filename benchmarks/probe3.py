"""Walk design probe 3: what slows flat vec4 kernels down (isolating extra loads, integer
division by a runtime seq, float->int conversion, select). Same sizes as probe2."""

from __future__ import annotations

import os
import sys
import tempfile

import numpy as np

os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.gettempdir())

from kvdsl.emit import emit  # noqa: E402
from kvdsl.ir import (
    Dispatch,
    KernelBuilder,
    clamp,
    construct,
    f32,
    i32,
    round_,
    vec,
)  # noqa: E402
from kvdsl.nodes.index import workgroup_flat  # noqa: E402
from kvdsl.runtime import time_kernel  # noqa: E402

FOLD, D, H = 65535, 128, 8
V4 = vec(4, f32)


def kernel(name, body, out=V4, extra=(), wg=256):
    kb = KernelBuilder(name, wg)
    sk = kb.binding("src_k", V4, "read")
    bufs = {n: kb.binding(n, V4, "read") for n in extra}
    pk = kb.binding("present_key", out, "read_write")
    kb.workgroup_const("WG")
    n = kb.param("count")
    seq = kb.param("seq")
    e = kb.let("e", workgroup_flat(kb, FOLD) * wg + kb.lid.x)
    with kb.if_(e >= n):
        kb.ret()
    body(kb, e, seq, sk, pk, bufs)
    return kb.build(Dispatch(n.node, wg, FOLD))


def plain(kb, e, seq, sk, pk, bufs):
    pk[e] = sk[e]


def divs(kb, e, seq, sk, pk, bufs):
    d4 = kb.let("d4", e % 32)
    row = kb.let("row", e / 32)
    t = kb.let("t", row % seq)
    bh = kb.let("bh", row / seq)
    src = kb.let("src", (bh / 8 * seq + t) * 256 + bh % 8 * 32 + d4)
    pk[e] = sk[src]


def round_only(kb, e, seq, sk, pk, bufs):
    pk[e] = round_(sk[e] * 20.0)


def convert_only(kb, e, seq, sk, pk, bufs):
    pk[e] = (sk[e] * 20.0).to(vec(4, i32))


def clamp_convert(kb, e, seq, sk, pk, bufs):
    s = construct(V4, 1.0, 1.0, 1.0, 1.0)
    pk[e] = clamp(round_(sk[e] * 20.0), s * -128.0, s * 127.0).to(vec(4, i32))


def second_load(kb, e, seq, sk, pk, bufs):
    pk[e] = sk[e] + sk[e ^ 16]


def table_loads(kb, e, seq, sk, pk, bufs):
    j = kb.let("j", (e / 32 % seq) * 16 + e % 16)
    pk[e] = sk[e] * bufs["cos_cache"][j] + sk[e] * bufs["sin_cache"][j]


CASES = [
    ("plain", plain, V4, ()),
    ("div_by_runtime_seq", divs, V4, ()),
    ("round", round_only, V4, ()),
    ("convert_f32_i32", convert_only, vec(4, i32), ()),
    ("clamp_round_convert", clamp_convert, vec(4, i32), ()),
    ("second_load_same_row", second_load, V4, ()),
    ("cos_sin_table_loads", table_loads, V4, ("cos_cache", "sin_cache")),
]


def main() -> None:
    small = "--small" in sys.argv
    seq = 256 if small else 8192
    n = 4 * H * seq * D
    a = np.random.default_rng(0).random(n, np.float32) + 0.5
    tab = a[: seq * D // 2].copy()
    base = None
    for name, body, out, extra in CASES:
        k = kernel(name, body, out, extra)
        if name == "clamp_round_convert":
            print(emit(k))
        o = np.zeros(n, np.float32 if out == V4 else np.int32)
        bufs = {"src_k": a, "present_key": o} | {x: tab for x in extra}
        t = float(np.median(time_kernel(k, bufs, {"count": n // 4, "seq": seq}, repeats=30)))
        base = base or t
        print(f"{name:<24} {t * 1e6:8.1f} us  {base / t * 100:6.1f}% of plain")


if __name__ == "__main__":
    main()
