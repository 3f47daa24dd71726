"""Walk design probe 2 (B=4, 8 heads, 8192 tokens, head dim 128, f32): drop-in cooperative copy
with the guard hoisted off full tiles, and flat vec4 walks with rotary, K RMSNorm (row sum
recomputed per invocation from cache) and int8/int4 quantisation. Prints GB/s against a flat
vec4 copy of the same bytes measured in the same run.

    python benchmarks/probe2.py [--small]
"""

from __future__ import annotations

import argparse
import os
import tempfile

import numpy as np

os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.gettempdir())

from kvdsl.ir import (  # noqa: E402
    Dispatch,
    KernelBuilder,
    clamp,
    construct,
    dot,
    f32,
    i32,
    inverse_sqrt,
    round_,
    select,
    u32,
    vec,
)
from kvdsl.nodes.index import workgroup_flat  # noqa: E402
from kvdsl.runtime import adapter_info, time_kernel  # noqa: E402

FOLD, D, H = 65535, 128, 8
V4 = vec(4, f32)


def flat_copy(wg=256):
    kb = KernelBuilder("flat_vec4_copy", wg)
    src = kb.binding("src", V4, "read")
    dst = kb.binding("dst", V4, "read_write")
    n = kb.param("count")
    kb.workgroup_const("WG")
    e = kb.let("e", workgroup_flat(kb, FOLD) * wg + kb.lid.x)
    with kb.if_(e < n):
        dst[e] = src[e]
    return kb.build(Dispatch(n.node, wg, FOLD))


def coop_kv(loads_first: bool, wg=64):
    kb = KernelBuilder(f"coop_kv_hoisted{'_lf' if loads_first else ''}", wg)
    sk = kb.binding("src_k", f32, "read")
    sv = kb.binding("src_v", f32, "read")
    pk = kb.binding("present_key", f32, "read_write")
    pv = kb.binding("present_value", f32, "read_write")
    hd = kb.const("HEAD_DIM", u32, D)
    WG = kb.workgroup_const("WG")
    rows = kb.param("count")
    base = kb.let("elemBase", workgroup_flat(kb, FOLD) * (WG * hd))
    total = kb.let("totalElems", rows * hd)
    with kb.if_(base + WG * hd <= total):
        with kb.for_range("s", 0, hd) as s:
            e = kb.let("e", base + s * WG + kb.lid.x)
            if loads_first:
                a, b = kb.let("a", sk[e]), kb.let("b", sv[e])
                pk[e], pv[e] = a, b
            else:
                pk[e] = sk[e]
                pv[e] = sv[e]
    with kb.else_():
        with kb.for_range("s", 0, hd) as s:
            e = kb.let("e", base + s * WG + kb.lid.x)
            with kb.if_(e < total):
                pk[e] = sk[e]
                pv[e] = sv[e]
    return kb.build(Dispatch(rows.node, wg, FOLD))


def splat(x):
    return construct(V4, x, x, x, x)


def flat_build(knorm: bool, rotary: bool, quant: int, wg=256, use_var=True, v_quant=True):
    """present[b,h,t,d4] from BSH src; one vec4 per invocation."""
    tag = ("" if use_var else "_let") + ("" if v_quant else "_vplain")
    kb = KernelBuilder(f"flat_build_n{int(knorm)}_r{int(rotary)}_q{quant}{tag}", wg)
    sk = kb.binding("src_k", V4, "read")
    sv = kb.binding("src_v", V4, "read")
    if knorm:
        wt = kb.binding("k_norm_weight", V4, "read")
    if rotary:
        cs_ = kb.binding("cos_cache", V4, "read")
        sn_ = kb.binding("sin_cache", V4, "read")
    out = {0: V4, 8: vec(4, i32), 4: vec(2, u32)}[quant]
    pk = kb.binding("present_key", out, "read_write")
    pv = kb.binding("present_value", out, "read_write")
    hd4 = kb.const("HEAD_DIM_V4", u32, D // 4)
    half4 = kb.const("HALF_V4", u32, D // 8)
    heads = kb.const("KV_HEADS", u32, H)
    kb.workgroup_const("WG")
    seq, n = kb.param("seq"), kb.param("count")
    e = kb.let("e", workgroup_flat(kb, FOLD) * wg + kb.lid.x)
    with kb.if_(e >= n):
        kb.ret()
    d4 = kb.let("d4", e % hd4)
    row = kb.let("row", e / hd4)
    t = kb.let("t", row % seq)
    bh = kb.let("bh", row / seq)
    hk = kb.let("hk", bh % heads)
    b = kb.let("b", bh / heads)
    src = kb.let("src", (b * seq + t) * (heads * hd4) + hk * hd4)
    k = kb.var("k", V4, sk[src + d4]) if use_var else kb.let("k", sk[src + d4])
    if knorm:
        ms = kb.var("ms", f32, 0.0)
        with kb.for_range("j", 0, hd4) as j:
            x = kb.let("x", sk[src + j])
            ms.set(ms + dot(x, x))
        inv = kb.let("inv", inverse_sqrt(ms / float(D) + 1e-6))
        k.set(k * inv * wt[d4])
    if rotary:
        lo = kb.let("lo", d4 < half4)
        dr = kb.let("dr", d4 % half4)
        c = kb.let("c", cs_[t * half4 + dr])
        s = kb.let("s", sn_[t * half4 + dr])
        other = kb.let("other", sk[src + select(dr, dr + half4, lo)] if not knorm else sk[src + dr])
        rot = select(k * c + other * s, k * c - other * s, lo)
        if use_var:
            k.set(rot)
        else:
            k = kb.let("kr", rot)
    v = kb.let("v", sv[src + d4])
    if quant == 0:
        pk[e] = k
        pv[e] = v
    elif quant == 8:
        lo8, hi8 = splat(-128.0), splat(127.0)
        pk[e] = clamp(round_(k * 20.0), lo8, hi8).to(vec(4, i32))
        pv[e] = clamp(round_(v * 20.0), lo8, hi8).to(vec(4, i32)) if v_quant else v.to(vec(4, i32))
    else:
        for buf, x in ((pk, k), (pv, v)):
            q4 = clamp(round_(x * 3.0), splat(-8.0), splat(7.0)).to(vec(4, i32))
            q = kb.let(
                f"q{buf.binding.name[-1]}",
                (q4 + construct(vec(4, i32), 8, 8, 8, 8)).to(vec(4, u32))
                & construct(vec(4, u32), 15, 15, 15, 15),
            )
            buf[e] = construct(vec(2, u32), q.x | (q.y << 4), q.z | (q.w << 4))
    items = n
    return kb.build(Dispatch(items.node, wg, FOLD))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", action="store_true")
    args = ap.parse_args()
    seq = 256 if args.small else 8192
    rows = 4 * H * seq
    n = rows * D
    rng = np.random.default_rng(0)
    a = rng.random(n, np.float32) + 0.5
    out = np.zeros_like(a)
    print(adapter_info()["device"], f"rows={rows}")
    t_copy = float(
        np.median(time_kernel(flat_copy(), {"src": a, "dst": out}, {"count": n // 4}, repeats=30))
    )
    rate = 2 * 4 * n / t_copy
    print(f"{'flat vec4 copy':<28} {t_copy * 1e6:9.1f} us {rate / 1e9:8.0f} GB/s  roofline")

    def report(name, t, moved):
        gbs = moved / t
        print(f"{name:<28} {t * 1e6:9.1f} us {gbs / 1e9:8.0f} GB/s {100 * gbs / rate:6.1f}%")

    for lf in (False, True):
        k = coop_kv(lf)
        bufs = {"src_k": a, "src_v": a, "present_key": out, "present_value": out}
        report(
            k.name, float(np.median(time_kernel(k, bufs, {"count": rows}, repeats=30))), 4 * 4 * n
        )
    cos = rng.random(seq * D // 2, np.float32)
    w = rng.random(D, np.float32)
    combos = [(0, 0, 0, 1, 1), (0, 0, 8, 1, 1), (0, 0, 8, 0, 1), (0, 0, 8, 0, 0), (0, 1, 0, 1, 1)]
    combos += [(0, 1, 0, 0, 1), (0, 0, 4, 0, 1), (0, 0, 0, 1, 1), (0, 0, 8, 1, 1)]
    for knorm, rotary, quant, use_var, v_quant in combos:
        k = flat_build(
            bool(knorm), bool(rotary), quant, use_var=bool(use_var), v_quant=bool(v_quant)
        )
        bufs = {"src_k": a, "src_v": a}
        if knorm:
            bufs["k_norm_weight"] = w
        if rotary:
            bufs |= {"cos_cache": cos, "sin_cache": cos}
        width = {0: 1, 8: 1, 4: 2}[quant]
        o = np.zeros(
            n // width, np.float32 if quant == 0 else (np.int32 if quant == 8 else np.uint32)
        )
        bufs |= {"present_key": o, "present_value": o}
        moved = 2 * 4 * n + 2 * n * (4 // width if quant else 4)
        t = float(np.median(time_kernel(k, bufs, {"count": n // 4, "seq": seq}, repeats=30)))
        report(k.name, t, moved)


if __name__ == "__main__":
    main()
