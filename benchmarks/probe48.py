"""Probe 48 (H200): what one workgroup can move, the ceiling of the drop-in decode appends.

A drop-in append keeps the template's dispatch, which at one token and batch 4 is one workgroup
for the whole 64 KB (K and V, 16 KB each, read and written). The probes before this one measured
the drop-ins' own forms against the spread-out copy; none timed the plainest kernel that could
run under that dispatch. This one does, beside the copy and the empty dispatch in one call, on the
copy's buffers (two pairs of ``vec4<f32>`` arrays, ``params.count`` vectors each):

- ``spread``: the roofline copy, one vector of each pair per invocation, 4 workgroups of 256;
- ``loop``: one workgroup of 256 lanes stepping by 256 (the drop-ins' walk, no index math);
- ``loads-first``: one workgroup, every lane's 8 loads (4 steps of K and V, clamped to the last
  vector) before any store, straight-line code;
- ``pairs``: one workgroup, a loop of two steps per trip, both steps' loads first;
- ``lanes-1024``: one workgroup of 1,024 lanes, one step (above WebGPU's default limit of 256
  invocations, so no drop-in may take it: it shows whether lanes or steps set the time);
- ``lanes-64``: one workgroup of 64 lanes stepping by 64, the template's own workgroup size;

and, for the same state of the GPU, two drop-in appends at one token. Every form is first
checked to copy every vector (destinations poisoned). Times are the best of each form's medians
over the rounds; ``x floor`` is the median (and the least) over rounds of its time over the
empty dispatch timed right after it. Each form's timing follows ``--settle`` seconds of large
copies (the GPU clocks down between decode-size dispatches).

    python benchmarks/probe48.py [--small] [--rounds N] [--settle S]
"""

from __future__ import annotations

import sys

import numpy as np

import probes
import roofline
from kvdsl.emit import emit
from kvdsl.runtime import device as gpu
from kvdsl.runtime import run_source, time_kernel

HEAD = """struct Params {
  count: u32,
}

@group(0) @binding(0) var<storage, read> src_k: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> src_v: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> dst_k: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> dst_v: array<vec4<f32>>;
@group(0) @binding(4) var<uniform> params: Params;
"""

LOOP = """
@compute @workgroup_size({lanes})
fn main(@builtin(local_invocation_index) l: u32) {{
  for (var i = l; i < params.count; i += {lanes}u) {{
    dst_k[i] = src_k[i];
    dst_v[i] = src_v[i];
  }}
}}
"""

LOADS_FIRST = """
@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) l: u32) {
  let last = params.count - 1u;
  let i0 = l;
  let i1 = l + 256u;
  let i2 = l + 512u;
  let i3 = l + 768u;
  let k0 = src_k[min(i0, last)];
  let k1 = src_k[min(i1, last)];
  let k2 = src_k[min(i2, last)];
  let k3 = src_k[min(i3, last)];
  let v0 = src_v[min(i0, last)];
  let v1 = src_v[min(i1, last)];
  let v2 = src_v[min(i2, last)];
  let v3 = src_v[min(i3, last)];
  if (i0 <= last) { dst_k[i0] = k0; dst_v[i0] = v0; }
  if (i1 <= last) { dst_k[i1] = k1; dst_v[i1] = v1; }
  if (i2 <= last) { dst_k[i2] = k2; dst_v[i2] = v2; }
  if (i3 <= last) { dst_k[i3] = k3; dst_v[i3] = v3; }
}
"""

PAIRS = """
@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) l: u32) {
  let last = params.count - 1u;
  for (var i = l; i <= last; i += 512u) {
    let j = i + 256u;
    let k0 = src_k[i];
    let v0 = src_v[i];
    let k1 = src_k[min(j, last)];
    let v1 = src_v[min(j, last)];
    dst_k[i] = k0;
    dst_v[i] = v0;
    if (j <= last) { dst_k[j] = k1; dst_v[j] = v1; }
  }
}
"""

DROPINS = ["merge_share_append_llama31_8b", "append_quant_int8_llama31_8b"]


def forms(count: int) -> dict[str, tuple[str, tuple[int, int, int]]]:
    """Name → (WGSL, workgroups) for a copy of ``count`` vectors of each pair."""
    spread = emit(roofline.copy_kernel())
    one = (1, 1, 1)
    out = {
        "spread": (spread, (-(-count // roofline.WG), 1, 1)),
        "loop": (HEAD + LOOP.format(lanes=256), one),
        "pairs": (HEAD + PAIRS, one),
        "lanes-64": (HEAD + LOOP.format(lanes=64), one),
    }
    if count <= 1024:
        out["loads-first"] = (HEAD + LOADS_FIRST, one)
        out["lanes-1024"] = (HEAD + LOOP.format(lanes=1024), one)
    return out


def main(argv: list[str]) -> None:
    small = "--small" in argv
    rounds = int(argv[argv.index("--rounds") + 1]) if "--rounds" in argv else 7
    settle = float(argv[argv.index("--settle") + 1]) if "--settle" in argv else 1.0
    size = probes.sizes(argv)
    gpu.configure(
        {
            "max-storage-buffer-binding-size": 1 << 28,
            "max-buffer-size": 1 << 28,
            "max-compute-invocations-per-workgroup": 1024,
            "max-compute-workgroup-size-x": 1024,
        }
    )
    limits = gpu.requested_limits()
    print(f"invocations per workgroup granted: {limits['max-compute-invocations-per-workgroup']}")
    if not small:
        roofline.settle(20)
    copy = roofline.copy_kernel()
    empty, ebufs = roofline.empty_kernel(), roofline.empty_buffers()
    ereuse: dict = {}
    dreuse: dict = {}
    pool = probes.Pool()
    dropins = [
        m
        for m in probes.measurements(DROPINS, size, pool)
        if m.plan.tokens == 1 and m.plan.batch == size["batches"][0]
    ]
    # Batch 4, one token, 8 KV heads, head dim 128: 1,024 vectors of K and as many of V.
    for count in (1024, 256) if not small else (64,):
        bufs, params = roofline.copy_buffers(64 * count)
        texts = forms(count)
        if limits["max-compute-invocations-per-workgroup"] < 1024:
            texts.pop("lanes-1024", None)
        for name, (text, wg) in texts.items():
            b = dict(bufs)
            b["dst_k"] = np.full_like(bufs["dst_k"], np.nan)
            b["dst_v"] = np.full_like(bufs["dst_v"], np.nan)
            got = run_source(text, copy.bindings, copy.params, b, params, wg, label=name)
            for d, s in (("dst_k", "src_k"), ("dst_v", "src_v")):
                assert np.array_equal(got[d], bufs[s]), f"{name}: {d} differs"
        reuse: dict = {}
        times: dict[str, list[float]] = {n: [] for n in texts}
        over: dict[str, list[float]] = {n: [] for n in texts}
        extra = {f"{m.variant}": m for m in dropins} if count == 1024 else {}
        times |= {n: [] for n in extra}
        over |= {n: [] for n in extra}
        for _ in range(rounds):
            for name in times:
                roofline.settle(settle)
                if name in texts:
                    text, wg = texts[name]
                    ts = time_kernel(text, bufs, params, wg, bindings=copy.bindings,
                                     params_struct=copy.params, repeats=30, warmup=2000,
                                     label=name, reuse=reuse)  # fmt: skip
                else:
                    m = extra[name]
                    ts = time_kernel(m.text, m.bufs, m.params, m.wg, bindings=m.kernel.bindings,
                                     params_struct=m.kernel.params, repeats=30, warmup=2000,
                                     label=name, reuse=dreuse)  # fmt: skip
                us = float(np.median(ts)) * 1e6
                fl = float(np.median(time_kernel(empty, ebufs, None, (1, 1, 1), repeats=30, warmup=2000,
                                                 reuse=ereuse))) * 1e6  # fmt: skip
                times[name].append(us)
                over[name].append(us / fl)
        print(f"\n{count} vectors a pair ({64 * count} bytes moved), {rounds} rounds")
        for name in times:
            print(
                f"{name:<36} best {min(times[name]):7.2f} us  median "
                f"{float(np.median(times[name])):7.2f} us  x floor median {float(np.median(over[name])):5.2f}"
                f" best {min(over[name]):5.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main(sys.argv[1:])
