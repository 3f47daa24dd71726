"""Running a kernel over a cache larger than one storage binding: windows of whole slices.

WebGPU's default limits bind at most 128 MiB per storage binding
(``maxStorageBufferBindingSize``), hold at most 256 MiB per buffer (``maxBufferSize``) and start a
bound range at a multiple of 256 bytes (``minStorageBufferOffsetAlignment``). A 32K-token cache of
8 heads of 128 f32 is 128 MiB per K or V; longer contexts, more heads or batches are more.

A windowed kernel (``window=True``, :class:`kvdsl.nodes.index.CacheWindow`) works on the rows of
a window of whole ``(batch, kv head)`` slices: its cache bindings hold the window's slices only,
``params.headBase`` says which slice they start at, and ``params.count`` counts the window's rows.
:func:`plan_windows` (pure Python: the limits are arguments) cuts a cache of ``slices`` slices into
windows and the windows into buffers:

- every window holds ``window_slices`` slices (the last one what is left), a multiple of the
  alignment unit: the fewest slices whose bytes, in every cache binding, are a multiple of the
  offset alignment, so that each window's bound range starts aligned;
- a window's bytes in each cache binding are at most the binding limit;
- each buffer holds ``buffer_slices`` slices, a whole number of windows, at most the buffer limit;
- the BSH sources (new K/V, interleaving every head of a token) are bound whole where each fits
  one binding; else the windows start and end on whole batches (``window_slices`` a multiple of
  the heads) and each window binds its batches' range of the source, from ``batchBase``. One
  batch's source (``tokens * kvHeads * headDim`` elements) must then fit one binding: the longest
  prompt a windowed ``build`` takes under the default limits is 32K tokens of 8 heads of 128 f32;
- every other binding (``seqlens_k``, rotary tables, K-norm weight, scales) is bound whole.

:func:`run_windows` uploads a cache held as those buffers and dispatches the kernel once per
window, each over its bound sub-ranges with its own params; ``copy``, whose kernel is
position-independent, runs the same way with ``count`` alone set per window.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from kvdsl.ir.tree import Kernel

#: WebGPU's default maxStorageBufferBindingSize, maxBufferSize, minStorageBufferOffsetAlignment.
DEFAULT_BINDING, DEFAULT_BUFFER, DEFAULT_ALIGNMENT = 134_217_728, 268_435_456, 256


class WindowError(ValueError):
    """A cache that cannot be cut into windows under the limits, or buffers that do not match
    the cache's shape; the message says what does not fit and why."""


@dataclass(frozen=True)
class Limits:
    """The device limits the windows must keep: bytes per storage binding, bytes per buffer, and
    the alignment of a bound range's offset (WebGPU's defaults unless given)."""

    binding: int = DEFAULT_BINDING
    buffer: int = DEFAULT_BUFFER
    alignment: int = DEFAULT_ALIGNMENT

    def __post_init__(self) -> None:
        for field in ("binding", "buffer", "alignment"):
            value = getattr(self, field)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise WindowError(f"limits {field}={value!r}: expected a positive integer")
        if self.alignment & (self.alignment - 1):
            raise WindowError(f"limits alignment={self.alignment}: expected a power of two")


@dataclass(frozen=True)
class Window:
    """Slices ``[first, end)`` of the cache, held in buffer ``buffer``; ``batch_base`` is the
    first batch of the sources' bound range (0 where they are bound whole)."""

    first: int
    end: int
    buffer: int
    batch_base: int

    @property
    def slices(self) -> int:
        """The window's slices."""
        return self.end - self.first


@dataclass(frozen=True)
class Range:
    """A bound sub-range: buffer ``buffer`` of a binding, from byte ``offset``, ``size`` bytes."""

    buffer: int
    offset: int
    size: int


@dataclass(frozen=True)
class WindowPlan:
    """The windows of a cache of ``slices`` slices (``heads`` per batch) and its buffers.

    ``cache`` maps each cache binding to its bytes per slice, ``sources`` each BSH source to its
    bytes per batch; ``by_batch`` says whether the sources are bound per window (else whole).
    """

    slices: int
    heads: int
    window_slices: int
    buffer_slices: int
    cache: Mapping[str, int]
    sources: Mapping[str, int]
    by_batch: bool
    windows: tuple[Window, ...]

    @property
    def buffers(self) -> tuple[tuple[int, int], ...]:
        """The slices ``[first, end)`` each buffer of a cache binding holds."""
        step = self.buffer_slices
        return tuple((s, min(s + step, self.slices)) for s in range(0, self.slices, step))

    def cache_range(self, name: str, w: Window) -> Range:
        """Window ``w``'s bound range of cache binding ``name``."""
        per = self.cache[name]
        first = self.buffers[w.buffer][0]
        return Range(w.buffer, (w.first - first) * per, w.slices * per)

    def source_range(self, name: str, w: Window) -> Range:
        """Window ``w``'s bound range of source ``name``, in the whole source's bytes (buffer 0:
        the source as the host holds it)."""
        per = self.sources[name]
        if not self.by_batch:
            return Range(0, 0, per * (self.slices // self.heads))
        end = -(-w.end // self.heads)
        return Range(0, w.batch_base * per, (end - w.batch_base) * per)


def plan_windows(
    slices: int,
    heads: int,
    cache: Mapping[str, int],
    sources: Mapping[str, int] | None = None,
    whole: Mapping[str, int] | None = None,
    limits: Limits = Limits(),
) -> WindowPlan:
    """Cut a cache of ``slices`` ``(batch, kv head)`` slices, ``heads`` per batch, into windows.

    ``cache``: bytes per slice of each BNSH cache binding; ``sources``: bytes per batch of each
    BSH source; ``whole``: bytes of each binding bound whole. Raises :class:`WindowError` naming
    the binding and the limit that cannot be kept.
    """
    sources, whole = dict(sources or {}), dict(whole or {})
    for field, value in (("slices", slices), ("heads", heads)):
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise WindowError(f"{field}={value!r}: expected a positive integer")
    if slices % heads:
        raise WindowError(f"slices={slices}: expected a multiple of heads={heads} (whole batches)")
    if not cache:
        raise WindowError("cache: expected at least one cache binding to cut into windows")
    room = min(limits.binding, limits.buffer)
    for name, size in whole.items():
        if size > limits.binding:
            raise WindowError(
                f"binding '{name}' is bound whole: {size} bytes, past the binding limit of "
                f"{limits.binding} bytes"
            )
    for name, per in cache.items():
        if per <= 0 or per > room:
            raise WindowError(
                f"binding '{name}': one (batch, kv head) slice is {per} bytes, past the "
                f"binding limit of {room} bytes (a window holds whole slices)"
            )
    # The fewest slices whose bytes are a multiple of the alignment in every cache binding.
    unit = 1
    for per in cache.values():
        unit = math.lcm(unit, limits.alignment // math.gcd(per, limits.alignment))
    batches = slices // heads
    by_batch = any(per * batches > limits.binding for per in sources.values())
    if by_batch:
        for name, per in sources.items():
            if per > limits.binding:
                raise WindowError(
                    f"binding '{name}': one batch of the source is {per} bytes, past the "
                    f"binding limit of {limits.binding} bytes (BSH sources interleave every "
                    "head of a token, so a window binds whole batches of them)"
                )
            step = limits.alignment // math.gcd(per, limits.alignment)
            unit = math.lcm(unit, heads * step)
    most = min(room // per for per in cache.values())
    if by_batch:
        most = min(most, min(limits.binding // per for per in sources.values()) * heads)
    window = most // unit * unit
    if window == 0:
        name = max(cache, key=lambda n: cache[n])
        why = "whole batches and offsets" if by_batch else "offsets"
        raise WindowError(
            f"binding '{name}': a window must hold a multiple of {unit} slices ({why} "
            f"multiples of {limits.alignment} bytes), and {unit} slices are "
            f"{unit * cache[name]} bytes, past the binding limit of {room} bytes"
        )
    window = min(window, -(-slices // unit) * unit)
    per_buffer = min(limits.buffer // (window * per) for per in cache.values())
    buffer_slices = per_buffer * window
    windows = tuple(
        Window(s, min(s + window, slices), s // buffer_slices, s // heads if by_batch else 0)
        for s in range(0, slices, window)
    )
    return WindowPlan(slices, heads, window, buffer_slices, dict(cache), sources, by_batch, windows)


def run_windows(
    kernel: Kernel,
    buffers: dict[str, np.ndarray],
    params: dict[str, int | float],
    *,
    heads: int,
    slices: int,
    cache: tuple[str, ...],
    sources: tuple[str, ...] = (),
    limits: Limits = Limits(),
) -> dict[str, np.ndarray]:
    """Run ``kernel`` over a whole cache by windows; the read_write bindings' final contents.

    ``buffers`` hold the whole cache and inputs as for :func:`kvdsl.runtime.run`, ``params``
    the whole dispatch's (``count`` = every row). ``cache`` names the BNSH cache bindings (cut
    by slices into buffers of at most ``limits.buffer`` bytes), ``sources`` the BSH ones
    (:func:`kvdsl.kernels.config.window_bindings` gives both for a mode). Each window's
    dispatch binds its sub-ranges, with ``count`` = its rows, ``headBase`` = its first slice and
    ``batchBase`` = its sources' first batch (where the kernel has those params).
    """
    from kvdsl.emit import emit
    from kvdsl.ir.dispatch import workgroups as dispatch_workgroups
    from kvdsl.runtime import device as gpu
    from kvdsl.runtime.contract import check_contract, check_workgroups
    from kvdsl.runtime.layout import check_buffers, from_storage, pack_params, to_storage
    from kvdsl.runtime.submit import buffer_entry, encode_pass, mapped_bytes, staging_copy

    buffers = check_buffers(kernel.bindings, buffers)
    fields = {f for f, _ in kernel.params.fields} if kernel.params is not None else set()
    if sources and "headBase" not in fields:
        raise WindowError(
            f"kernel {kernel.name} has no headBase param: only a position-independent kernel "
            "(copy, with no sources) runs by windows without one; run the mode's windowed "
            "variant (window=True)"
        )
    if "count" not in params:
        raise WindowError("params: expected 'count', the rows of the whole cache")
    if params["count"] % slices:
        raise WindowError(
            f"count={params['count']}: expected a multiple of slices={slices} (rows per slice)"
        )
    per_slice = params["count"] // slices
    storage = {b.name: to_storage(b.elem, buffers[b.name]) for b in kernel.bindings}
    batches = slices // heads
    parts: dict[str, dict[str, int]] = {"cache": {}, "sources": {}, "whole": {}}
    for b in kernel.bindings:
        size = len(storage[b.name])
        role, n = (
            ("cache", slices)
            if b.name in cache
            else ("sources", batches) if b.name in sources else ("whole", 1)
        )
        if size % n:
            raise WindowError(
                f"binding '{b.name}': {size} bytes do not split into {n} equal "
                + ("slices" if role == "cache" else "batches")
            )
        parts[role][b.name] = size // n
    plan = plan_windows(slices, heads, parts["cache"], parts["sources"], parts["whole"], limits)

    wgsl = emit(kernel)
    pipe = gpu.pipeline(wgsl, kernel.bindings, kernel.params is not None, kernel.name)
    dev = pipe.device
    have = {
        "binding": dev.limits["max-storage-buffer-binding-size"],
        "buffer": dev.limits["max-buffer-size"],
        "alignment": dev.limits["min-storage-buffer-offset-alignment"],
    }
    for field, value in have.items():
        want = getattr(limits, field)
        if field == "alignment" and want % value:
            raise WindowError(
                f"limits alignment={want}: expected a multiple of the device's {value} bytes"
            )
        if field != "alignment" and want > value:
            raise WindowError(f"limits {field}={want}: expected at most the device's {value} bytes")
    wgpu = gpu.wgpu_module()
    usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC
    held: dict[str, list] = {}
    for name, per in parts["cache"].items():
        data = storage[name]
        held[name] = [
            dev.create_buffer_with_data(data=data[a * per : e * per], usage=usage)
            for a, e in plan.buffers
        ]
    bound_whole = list(parts["whole"]) + ([] if plan.by_batch else list(parts["sources"]))
    for name in bound_whole:
        held[name] = [dev.create_buffer_with_data(data=storage[name], usage=usage)]
    limit = dev.limits["max-compute-workgroups-per-dimension"]
    encoder = dev.create_command_encoder()
    keep = []  # the per-window uniform and source buffers live until the submit
    for w in plan.windows:
        window_params = dict(params) | {"count": w.slices * per_slice}
        window_params |= {"headBase": w.first, "batchBase": w.batch_base}
        window_params = {k: v for k, v in window_params.items() if k in fields}
        views, entries = {}, []
        for i, b in enumerate(kernel.bindings):
            host = buffers[b.name].reshape(-1)
            if b.name in parts["cache"]:
                r = plan.cache_range(b.name, w)
                buf = held[b.name][r.buffer]
                n = host.size // slices
                views[b.name] = host[w.first * n : w.end * n]
            elif b.name in parts["sources"] and plan.by_batch:
                r = plan.source_range(b.name, w)
                data = storage[b.name][r.offset : r.offset + r.size]
                buf = dev.create_buffer_with_data(data=data, usage=usage)
                keep.append(buf)
                per, n = parts["sources"][b.name], host.size // batches
                views[b.name] = host[r.offset // per * n : (r.offset + r.size) // per * n]
                r = Range(0, 0, r.size)
            else:
                buf = held[b.name][0]
                r = Range(0, 0, buf.size)
                views[b.name] = host
            entries.append(buffer_entry(i, buf, r.offset, r.size))
        check_contract(kernel, views, window_params)
        check_workgroups(kernel, window_params, limit)
        if kernel.params is not None:
            uniform = dev.create_buffer_with_data(
                data=pack_params(kernel.params, window_params), usage=wgpu.BufferUsage.UNIFORM
            )
            keep.append(uniform)
            entries.append(buffer_entry(len(kernel.bindings), uniform))
        group = dev.create_bind_group(layout=pipe.layout, entries=entries)
        encode_pass(encoder, pipe.pipeline, group, dispatch_workgroups(kernel, window_params))
    written = [b for b in kernel.bindings if b.access == "read_write"]
    staging = {b.name: [staging_copy(dev, encoder, src) for src in held[b.name]] for b in written}
    dev.queue.submit([encoder.finish()])
    return {
        b.name: from_storage(
            b.elem, b"".join(mapped_bytes(dst) for dst in staging[b.name]), buffers[b.name]
        )
        for b in written
    }
