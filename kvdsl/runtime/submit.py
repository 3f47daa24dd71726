"""How kvdsl hands work to a GPU, stated once: a compute pass encoded into a command encoder, a
buffer read back through a mapped copy, timestamp queries turned into seconds.

A single dispatch (:func:`kvdsl.runtime.run`), timed dispatches
(:func:`kvdsl.runtime.time_kernel`), windows over a cache past one binding
(:func:`kvdsl.runtime.run_windows`) and a session's steps (:class:`kvdsl.session.GpuHost`) all
go through these; what differs between them is what they bind and when they submit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from kvdsl.runtime import device as gpu

if TYPE_CHECKING:
    import wgpu


def buffer_entry(binding: int, buffer: Any, offset: int = 0, size: int | None = None) -> dict:
    """The bind group entry binding ``size`` bytes of ``buffer`` from ``offset`` (by default the
    rest of the buffer) at ``@binding(binding)``."""
    size = buffer.size - offset if size is None else size
    return {"binding": binding, "resource": {"buffer": buffer, "offset": offset, "size": size}}


def encode_pass(
    encoder: wgpu.GPUCommandEncoder,
    pipeline: Any,
    group: Any,
    workgroups: tuple[int, int, int],
    timestamp_writes: dict | None = None,
) -> None:
    """One compute pass dispatching ``pipeline`` over ``workgroups`` with bind group ``group``
    (group 0), between the timestamps ``timestamp_writes`` names (:meth:`Timestamps.writes`)."""
    compute = encoder.begin_compute_pass(timestamp_writes=timestamp_writes)
    compute.set_pipeline(pipeline)
    compute.set_bind_group(0, group)
    compute.dispatch_workgroups(*workgroups)
    compute.end()


def staging_copy(dev: wgpu.GPUDevice, encoder: wgpu.GPUCommandEncoder, src: Any) -> Any:
    """A mappable copy of the whole of ``src``, recorded into ``encoder``; read it with
    :func:`mapped_bytes` once ``encoder`` is submitted."""
    wgpu = gpu.wgpu_module()
    usage = wgpu.BufferUsage.COPY_DST | wgpu.BufferUsage.MAP_READ
    dst = dev.create_buffer(size=src.size, usage=usage)
    encoder.copy_buffer_to_buffer(src, 0, dst, 0, src.size)
    return dst


def mapped_bytes(staging: Any, size: int | None = None) -> bytes:
    """The first ``size`` bytes (all by default) of a mappable buffer, after every submission
    that writes it (waits for them)."""
    staging.map_sync(gpu.wgpu_module().MapMode.READ)
    data = bytes(staging.read_mapped(0, staging.size if size is None else size, copy=False))
    staging.unmap()
    return data


def read_buffer(dev: wgpu.GPUDevice, buffer: Any) -> bytes:
    """The whole of ``buffer``, after every submission so far."""
    encoder = dev.create_command_encoder()
    staging = staging_copy(dev, encoder, buffer)
    dev.queue.submit([encoder.finish()])
    data = mapped_bytes(staging)
    staging.destroy()
    return data


class Timestamps:
    """A query set of ``pairs`` timestamp pairs (a pass's start and end each) and the buffers
    that read them back."""

    def __init__(self, dev: wgpu.GPUDevice, pairs: int) -> None:
        usage = gpu.wgpu_module().BufferUsage
        self.dev, self.pairs = dev, pairs
        self.queries = dev.create_query_set(type="timestamp", count=2 * pairs)
        self._resolved = dev.create_buffer(
            size=16 * pairs, usage=usage.QUERY_RESOLVE | usage.COPY_SRC
        )
        self._staging = dev.create_buffer(size=16 * pairs, usage=usage.COPY_DST | usage.MAP_READ)

    def writes(self, pair: int, begin: bool = True, end: bool = True) -> dict:
        """A pass's ``timestamp_writes``: pair ``pair``'s start (``begin``) and end (``end``)."""
        out: dict[str, Any] = {"query_set": self.queries}
        if begin:
            out["beginning_of_pass_write_index"] = 2 * pair
        if end:
            out["end_of_pass_write_index"] = 2 * pair + 1
        return out

    def ticks(
        self, first: int, count: int, encoder: wgpu.GPUCommandEncoder | None = None
    ) -> np.ndarray:
        """Pairs ``first .. first + count - 1`` as ``(count, 2)`` int64 ticks (start, end),
        resolved at the end of ``encoder`` (a new one by default), which this submits."""
        encoder = encoder or self.dev.create_command_encoder()
        encoder.resolve_query_set(self.queries, 2 * first, 2 * count, self._resolved, 0)
        encoder.copy_buffer_to_buffer(self._resolved, 0, self._staging, 0, 16 * count)
        self.dev.queue.submit([encoder.finish()])
        raw = mapped_bytes(self._staging, 16 * count)
        return np.frombuffer(raw, np.uint64).reshape(count, 2).astype(np.int64)

    def seconds(self, ticks: np.ndarray) -> list[float]:
        """Each (start, end) pair of ``ticks`` as the GPU seconds between them."""
        period = nanoseconds_per_tick(self.dev)
        return [float(end - begin) * period * 1e-9 for begin, end in ticks]


def nanoseconds_per_tick(dev: wgpu.GPUDevice) -> float:
    """Nanoseconds per tick of ``dev``'s timestamp queries (WebGPU's timestamp period).

    WebGPU says timestamps are nanoseconds, but wgpu-native returns raw ticks unless timestamp
    normalisation is on; wgpu-py 0.32 has no wrapper for ``wgpuQueueGetTimestampPeriod``, so it is
    called through wgpu-py's cffi handle when present (1.0 on NVIDIA and llvmpipe anyway).
    """
    if gpu.current_webgpu().implementation == "dawn":
        return 1.0  # Dawn converts ticks to nanoseconds itself
    try:
        from wgpu.backends.wgpu_native._ffi import lib

        return float(lib.wgpuQueueGetTimestampPeriod(dev.queue._internal))
    except (ImportError, AttributeError):
        return 1.0
