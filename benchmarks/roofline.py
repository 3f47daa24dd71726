"""The two reference kernels of the GPU benchmark: the vec4 copy roofline and the empty dispatch.

Both are built with kvdsl's builder and emitted like every catalog kernel, so they go through the
same runtime path (pipeline cache, bind groups, timestamp queries) as the kernels they measure.

- :func:`copy_kernel`: ``dst_k[i] = src_k[i]; dst_v[i] = src_v[i]`` over ``array<vec4<f32>>``,
  ``ceil(count / WG)`` workgroups folded into x/y at ``fold``. Timed moving ``N`` bytes it reads
  ``N / 2`` and writes ``N / 2``, a quarter through each buffer: the most a memory-bound kernel
  moving ``N`` bytes can hope for. Two buffer pairs, as K and V move, because on the H200 a
  copy whose buffers reach 256 MiB runs at ~3.2 TB/s against ~4.1 TB/s just below: with one
  pair, the 512 MB rows' copy would cross that line while the kernels' K and V buffers
  (≤ 134 MB) do not, and the copy would flatter them by up to 28%.
- :func:`empty_kernel`: one workgroup that touches nothing useful (one guarded store that never
  runs, so the module has a binding and a body). Its time is the dispatch floor: the least any
  kernel costs, whatever the bytes, and the target for decode-size (1-token) appends.
"""

from __future__ import annotations

import numpy as np

from kvdsl.ir import Dispatch, Kernel, KernelBuilder, f32, u32, vec
from kvdsl.nodes.index import flat_index

WG = 256
FOLD = 65535


def copy_kernel(workgroup_size: int = WG, fold: int = FOLD) -> Kernel:
    """``dst_k[i] = src_k[i]; dst_v[i] = src_v[i]`` for ``i < params.count`` vec4<f32>."""
    kb = KernelBuilder("roofline_copy_vec4", workgroup_size)
    src_k = kb.binding("src_k", vec(4, f32), "read")
    src_v = kb.binding("src_v", vec(4, f32), "read")
    dst_k = kb.binding("dst_k", vec(4, f32), "read_write")
    dst_v = kb.binding("dst_v", vec(4, f32), "read_write")
    kb.workgroup_const("WG")
    count = kb.param("count")
    i = flat_index(kb, fold, "i", bound=count)
    dst_k[i] = src_k[i]
    dst_v[i] = src_v[i]
    doc = "Roofline: a plain vec4<f32> copy of two buffer pairs, one vec4 of each per invocation."
    return kb.build(Dispatch(count.node, workgroup_size, fold), doc)


def copy_buffers(nbytes: int) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """Buffers and params for a copy moving ``nbytes`` in all (half read, half written).

    The byte count is rounded up to whole vec4s in each of the four buffers (at least one).
    """
    vec4s = max(1, -(-nbytes // 64))
    src = np.ones(4 * vec4s, np.float32)
    return {
        "src_k": src,
        "src_v": src + 1,
        "dst_k": np.zeros_like(src),
        "dst_v": np.zeros_like(src),
    }, {"count": vec4s}


def copy_bytes(nbytes: int) -> int:
    """The bytes the copy for ``nbytes`` actually moves (after rounding to vec4s)."""
    return 64 * max(1, -(-nbytes // 64))


def settle(seconds: float, nbytes: int = 1 << 28) -> int:
    """Keep the GPU busy with copies of ``nbytes`` for ``seconds``; the rounds run. A shared
    GPU met idle runs in slow states (copies 1.3-1.9x slower): ``benchmarks/gpu.py --settle``
    calls this first."""
    import time

    from kvdsl.runtime import time_kernel

    buffers, params = copy_buffers(nbytes)
    copy, reuse, rounds = copy_kernel(), {}, 0  # the device buffers go with ``reuse``
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        time_kernel(copy, buffers, params, repeats=20, warmup=0, reuse=reuse)
        rounds += 1
    return rounds


def empty_kernel() -> Kernel:
    """One workgroup of one invocation whose only store is never reached."""
    kb = KernelBuilder("empty_dispatch", 1)
    sink = kb.binding("sink", u32, "read_write")
    gid = kb.gid
    # A store guarded by a condition no invocation meets: the module needs a use of its binding.
    with kb.if_(gid.x > 0xFFFFFFF0):
        sink[0] = gid.x
    return kb.build(None, "The dispatch floor: one invocation that writes nothing.")


def empty_buffers() -> dict[str, np.ndarray]:
    """The empty kernel's one (untouched) buffer."""
    return {"sink": np.zeros(4, np.uint32)}
