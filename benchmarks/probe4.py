"""Walk design probe 4 (H200): what bounds 1-token decode appends and flat K RMSNorm.

Kernels are catalog variants, timed as emitted and as text-edited alternatives (loads hoisted
above the window arithmetic / the barrier, a 4-accumulator reduction), beside an empty dispatch
and a one-vec4-per-invocation copy of the same size, all in one run.
"""

from __future__ import annotations

import os
import sys
import tempfile

import numpy as np

os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.gettempdir())

from kvdsl import catalog  # noqa: E402
from kvdsl.emit import emit  # noqa: E402
from kvdsl.ir import workgroups  # noqa: E402
from kvdsl.runtime import time_kernel  # noqa: E402

B, H, D = 4, 8, 128


def timed(kernel, wgsl, bufs, params, reps=200):
    wg = workgroups(kernel, params)
    ts = time_kernel(
        wgsl, bufs, params, wg, bindings=kernel.bindings, params_struct=kernel.params,
        repeats=reps, warmup=50,
    )  # fmt: skip
    return float(np.median(ts)) * 1e6


def decode(small: bool):
    cap = 256 if small else 8192
    k = catalog.build("merge_share_append_flat_llama31_8b")
    base = emit(k)
    hoisted = base.replace(
        "  let total = u32(",
        "  let nSrc0 = (b * params.keySeq + j) * KV_HIDDEN_V4 + hk * HEAD_DIM_V4;\n"
        "  let kNew = new_k[nSrc0 + d4];\n  let vNew = new_v[nSrc0 + d4];\n  let total = u32(",
    ).replace("present_key[dst] = new_k[nSrc + d4];", "present_key[dst] = kNew;")
    hoisted = hoisted.replace(
        "present_value[dst] = new_v[nSrc + d4];", "present_value[dst] = vNew;"
    )
    assert hoisted != base
    rng = np.random.default_rng(0)
    new = rng.random(B * H * D, np.float32)
    pres = np.zeros(B * H * cap * D, np.float32)
    seqlens = np.array([cap // 2] * B, np.int32)
    bufs = {
        "new_k": new,
        "new_v": new,
        "seqlens_k": seqlens,
        "present_key": pres,
        "present_value": pres,
    }
    params = {"count": B * H, "seq": cap, "keySeq": 1}
    for name, text in (
        ("decode append (as emitted)", base),
        ("decode append (loads first)", hoisted),
    ):
        print(f"{name:<40} {timed(k, text, bufs, params):8.2f} us")
    # A kernel with the same dispatch that only stores (no dependent load) and an empty one.
    store_only = base.replace(
        "present_key[dst] = new_k[nSrc + d4];", "present_key[e] = vec4<f32>(1.0f);"
    )
    store_only = store_only.replace(
        "present_value[dst] = new_v[nSrc + d4];", "present_value[e] = vec4<f32>(2.0f);"
    )
    store_only = store_only.replace(
        "let total = u32(max(seqlens_k[b], -1i)) + 1u;", "let total = 5u + 0u * u32(seqlens_k[0]);"
    )
    print(f"{'same dispatch, stores only':<40} {timed(k, store_only, bufs, params):8.2f} us")


def knorm(small: bool):
    seq = 256 if small else 8192
    k = catalog.build("build_knorm_flat_qwen3_06b")
    base = emit(k)
    loop = (
        "  for (var j: u32 = 0u; j < HEAD_DIM_V4; j = j + 1u) {\n"
        "    ms = ms + wsum[rowLane + j];\n  }\n"
    )
    assert loop in base
    four = (
        "  var m1: f32 = 0.0f;\n  var m2: f32 = 0.0f;\n  var m3: f32 = 0.0f;\n"
        "  for (var j: u32 = 0u; j < HEAD_DIM_V4; j = j + 4u) {\n"
        "    ms = ms + wsum[rowLane + j];\n    m1 = m1 + wsum[rowLane + j + 1u];\n"
        "    m2 = m2 + wsum[rowLane + j + 2u];\n    m3 = m3 + wsum[rowLane + j + 3u];\n  }\n"
        "  ms = (ms + m1) + (m2 + m3);\n"
    )
    v_first = base.replace(
        "  wsum[lid.x] = dot(kSq, kSq);",
        "  var vv: vec4<f32>;\n  if (e < items) {\n    vv = src_v[srcBase + d4];\n  }\n"
        "  wsum[lid.x] = dot(kSq, kSq);",
    ).replace("present_value[e] = src_v[srcBase + d4];", "present_value[e] = vv;")
    v_first = v_first.replace("let k = src_k[srcBase + d4] * invRms", "let k = kSq * invRms")
    no_reduce = base.replace(loop, "  ms = wsum[lid.x] * 32.0f;\n")
    n = B * H * seq * D
    rng = np.random.default_rng(1)
    src = rng.random(n, np.float32) + 0.5
    out = np.zeros(n, np.float32)
    w = rng.random(D, np.float32)
    bufs = {
        "src_k": src,
        "src_v": src,
        "k_norm_weight": w,
        "present_key": out,
        "present_value": out,
    }
    params = {"count": B * H * seq, "seq": seq, "pastSeq": 0}
    variants = [
        ("knorm (as emitted)", base),
        ("knorm 4 accumulators", base.replace(loop, four)),
        ("knorm V loaded before barrier, K reused", v_first),
        ("knorm both", v_first.replace(loop, four)),
        ("knorm no reduction (bound)", no_reduce),
    ]
    for name, text in variants:
        t = timed(k, text, bufs, params, reps=50)
        print(f"{name:<40} {t:8.1f} us  {4 * 4 * n / t / 1e3:7.0f} GB/s")


if __name__ == "__main__":
    small = "--small" in sys.argv
    decode(small)
    knorm(small)
