"""A host that keeps buffers between dispatches and runs kernels through their host contract.

A :class:`Program` is a kernel with its contract entry (:func:`kvdsl.contract.entry`, what
``emitted/index.json`` holds for a catalog variant). Every dispatch goes through the entry alone:
the bindings' order and access, their sizes (``buffer_sizes`` of the shape), the params' bytes
(``params_bytes``) and the workgroups (``workgroups``). Two hosts share that code path:
:class:`GpuHost` (wgpu: device buffers, bind groups, timestamp queries, submitted as
:func:`kvdsl.runtime.run` and ``run_windows`` submit, through :mod:`kvdsl.runtime.submit`) and
:class:`InterpHost` (the interpreter, whose bounds and race checks run on every dispatch). A binding is a range of a
buffer (:class:`Bound`), so a cache can sit between canary rows that no dispatch may touch.

Before any dispatch the host checks the runtime inputs it passes (:func:`check_dispatch`): the
params fit their types, the requirements the contract states hold
(:func:`kvdsl.contract.check_requirements`, what ``kvdsl.js`` checks too), and no binding is
smaller than what the kernel touches for these params and these ``seqlens_k`` values (the
runtime's own contract, :mod:`kvdsl.runtime.contract`). A refusal names the field or binding,
the value and what is allowed.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from kvdsl import catalog
from kvdsl.contract import ContractError, buffer_sizes, check_requirements, entry
from kvdsl.contract import params_bytes, workgroups
from kvdsl.emit import emit
from kvdsl.ir import tree as ir
from kvdsl.ir.tree import Binding, Kernel
from kvdsl.kernels.config import KernelConfig
from kvdsl.runtime.submit import Timestamps, buffer_entry, encode_pass, read_buffer
from kvdsl.runtime.contract import evaluate, short_binding
from kvdsl.runtime.errors import BufferError, ParamsError

#: Bytes a bound range's offset is a multiple of (WebGPU's minStorageBufferOffsetAlignment and
#: minUniformBufferOffsetAlignment defaults).
ALIGN = 256


def aligned(n: int) -> int:
    """``n`` rounded up to a multiple of :data:`ALIGN`."""
    return -(-n // ALIGN) * ALIGN


@dataclass(frozen=True)
class Program:
    """One kernel and its host contract."""

    name: str
    kernel: Kernel
    entry: dict[str, Any]
    wgsl: str

    @classmethod
    def of(cls, cfg: KernelConfig, name: str) -> Program:
        """The program of ``cfg`` (a catalog variant's config, or any valid one)."""
        kernel = catalog.build_config(cfg, name)
        return cls(name, kernel, entry(kernel, cfg), emit(kernel))

    @classmethod
    def variant(cls, cfg: KernelConfig, label: str) -> Program:
        """The program of ``cfg`` under its catalog variant's name where the catalog names one,
        else named ``label``."""
        for name, known in catalog.VARIANTS.items():
            if known == cfg:
                return cls.of(cfg, name)
        return cls.of(cfg, label)

    @property
    def storage(self) -> list[dict[str, Any]]:
        """The storage bindings of the entry, in binding order."""
        return [b for b in self.entry["bindings"] if b["access"] != "uniform"]

    def binding(self, name: str) -> Binding:
        """The kernel's binding ``name`` (its host type, for the interpreter's arrays)."""
        b = self.kernel.binding(name)
        assert b is not None, name
        return b


@dataclass
class Buffer:
    """A host buffer: ``size`` bytes, held by the host that made it (``handle``)."""

    label: str
    size: int
    handle: Any = None


@dataclass(frozen=True)
class Bound:
    """The range ``[offset, offset + size)`` of ``buffer`` bound to one binding."""

    buffer: Buffer
    offset: int
    size: int

    def __post_init__(self) -> None:
        if self.offset % ALIGN or self.offset + self.size > self.buffer.size:
            raise BufferError(
                f"range [{self.offset}, {self.offset + self.size}) of buffer "
                f"'{self.buffer.label}' ({self.buffer.size} bytes): expected an offset that "
                f"is a multiple of {ALIGN} and a range inside the buffer"
            )


def check_dispatch(
    program: Program,
    bound: Mapping[str, Bound],
    shape: Mapping[str, int],
    params: Mapping[str, int],
    seqlens: np.ndarray | None = None,
    inputs: Mapping[str, np.ndarray] | None = None,
) -> tuple[bytes, tuple[int, int, int]]:
    """The params bytes and workgroups of a dispatch, after every check a host makes.

    Refused (before any dispatch): a binding without a range or a range without a binding, a
    range smaller than the contract's size for ``shape``, a params value outside its type
    (``ContractError``), a broken requirement of the kernel (``ParamsError``), a range smaller
    than what the kernel touches for ``params`` and the ``seqlens_k`` values (``BufferError``,
    as :mod:`kvdsl.runtime.contract` words it). ``inputs`` holds the host's values of other
    integer inputs that extents read (a page table's, a slot mapping's largest id: a pool
    smaller than the largest page one names is refused).
    """
    kernel = program.kernel
    names = [b["name"] for b in program.storage]
    for name in bound:
        if name not in names:
            raise BufferError(f"{program.name}: range '{name}' has no binding; it binds {names}")
    sizes, data, groups = _contract(program, shape, params)
    for name in names:
        if name not in bound:
            raise BufferError(f"{program.name}: binding '{name}' has no range")
        if bound[name].size < sizes[name]:
            raise BufferError(
                f"{program.name}: binding '{name}' is bound to {bound[name].size} bytes; the "
                f"contract sizes it {sizes[name]} bytes for shape {dict(shape)}"
            )
    broken, needs = _needs(program, params, seqlens, inputs)
    if broken is not None:
        raise ParamsError(broken)
    short = []
    for name, extent, need in needs:
        if name not in bound:
            continue
        have = bound[name].size // _element_bytes(program, name)
        if have < need:
            short.append(short_binding(program.name, kernel.binding(name), have, need, extent))
    if short:  # every short binding named at once, as kvdsl run names them
        raise BufferError("; ".join(short))
    return data, groups


#: The contract's answers by (program, shape, params): a session asks the same thousands of times.
_ANSWERS: dict[tuple, tuple[dict[str, int], bytes, tuple[int, int, int]]] = {}


def _contract(
    program: Program, shape: Mapping[str, int], params: Mapping[str, int]
) -> tuple[dict[str, int], bytes, tuple[int, int, int]]:
    """``buffer_sizes``, ``params_bytes`` and ``workgroups`` of the entry, each refusal a
    ``ParamsError`` naming the program."""
    key = (program.name, program.wgsl, tuple(shape.items()), tuple(params.items()))
    if key not in _ANSWERS:
        e = program.entry
        try:
            answer = (buffer_sizes(e, shape), params_bytes(e, params), workgroups(e, params))
        except ContractError as err:
            raise ParamsError(f"{program.name}: {err}") from None
        if len(_ANSWERS) > 4096:
            _ANSWERS.clear()
        _ANSWERS[key] = answer
    return _ANSWERS[key]


#: The kernel's requirements and extents by (program, params, the largest seqlens_k where an
#: extent reads it).
_NEEDS: dict[tuple, tuple[str | None, list[tuple[str, ir.Expr, int]]]] = {}
_READS_MAX: dict[str, bool] = {}  # by WGSL text: whether an extent reads a binding's largest value


def _needs(
    program: Program,
    params: Mapping[str, int],
    seqlens: np.ndarray | None,
    inputs: Mapping[str, np.ndarray] | None = None,
) -> tuple[str | None, list[tuple[str, ir.Expr, int]]]:
    """The refusal of the first requirement of the entry that ``params`` break
    (:func:`kvdsl.contract.check_requirements`; None: none), and each binding's least element
    count, evaluated by :mod:`kvdsl.runtime.contract`."""
    kernel = program.kernel
    reads = _READS_MAX.get(program.wgsl)
    if reads is None:
        reads = _READS_MAX[program.wgsl] = any(
            isinstance(n, ir.Member) and n.name == "max"
            for _, e in kernel.requires + kernel.extents
            for n in ir.walk(e)
        )
    values = {} if seqlens is None else {"seqlens_k": np.asarray(seqlens, np.int32)}
    top = None if not reads or seqlens is None or not len(seqlens) else int(np.max(seqlens))
    tops = ()
    for name, a in (inputs or {}).items():
        a = np.asarray(a, np.int32)
        values[name] = a
        tops += ((name, int(np.max(a)) if a.size else None),)
    key = (program.name, program.wgsl, tuple(params.items()), top, seqlens is None, tops)
    if key not in _NEEDS:
        broken = None
        try:  # the entry's requirements, as index.json and kvdsl.js state them
            check_requirements(program.entry, params, values, program.name)
        except ContractError as err:
            broken = str(err)
        needs = []
        if broken is None:
            for name, extent in kernel.extents:
                if kernel.binding(name) is not None:
                    needs.append((name, extent, evaluate(extent, kernel, params, values)))
        if len(_NEEDS) > 4096:
            _NEEDS.clear()
        _NEEDS[key] = (broken, needs)
    return _NEEDS[key]


def _element_bytes(program: Program, name: str) -> int:
    return next(b["element_bytes"] for b in program.storage if b["name"] == name)


class Host:
    """What both hosts do: buffers, writes, reads, and dispatches checked by the contract."""

    name = "host"

    def buffer(self, label: str, size: int) -> Buffer:
        """A new buffer of ``size`` bytes (a multiple of 4), zeroed."""
        buf = Buffer(label, max(aligned(size), ALIGN))
        self._allocate(buf)
        return buf

    def dispatch(
        self,
        program: Program,
        bound: Mapping[str, Bound],
        shape: Mapping[str, int],
        params: Mapping[str, int],
        seqlens: np.ndarray | None = None,
        inputs: Mapping[str, np.ndarray] | None = None,
    ) -> None:
        """Check the dispatch (:func:`check_dispatch`), then run it."""
        data, groups = check_dispatch(program, bound, shape, params, seqlens, inputs)
        self._dispatch(program, bound, params, data, groups)

    def prepare(self, program: Program) -> None:
        """Compile ``program`` now (the GPU host), so that no step's time holds its compile."""

    def write(self, buf: Buffer, offset: int, data: bytes | np.ndarray) -> None:
        """Write ``data`` at ``offset`` (ordered after every dispatch before it)."""
        raise NotImplementedError

    def read(self, buf: Buffer) -> bytes:
        """The whole buffer, after every dispatch so far."""
        raise NotImplementedError

    def step(self) -> None:
        """End a step: submit what is pending (the GPU host times each submission)."""

    def gpu_seconds(self) -> list[float] | None:
        """GPU seconds of each step so far, from timestamp queries; None without them."""
        return None

    def _allocate(self, buf: Buffer) -> None:
        raise NotImplementedError

    def _dispatch(
        self,
        program: Program,
        bound: Mapping[str, Bound],
        params: Mapping[str, int],
        data: bytes,
        groups: tuple[int, int, int],
    ) -> None:
        raise NotImplementedError


class InterpHost(Host):
    """Buffers as numpy bytes; each dispatch interpreted over exact copies of its ranges, so
    any access outside a range is the interpreter's ``OutOfBounds``, two writers a
    ``RaceError``."""

    name = "interpreter"

    def _allocate(self, buf: Buffer) -> None:
        buf.handle = np.zeros(buf.size, np.uint8)

    def write(self, buf: Buffer, offset: int, data: bytes | np.ndarray) -> None:
        raw = np.frombuffer(bytes(data) if isinstance(data, bytes) else data.tobytes(), np.uint8)
        buf.handle[offset : offset + raw.size] = raw

    def read(self, buf: Buffer) -> bytes:
        return buf.handle.tobytes()

    def _dispatch(self, program, bound, params, data, groups) -> None:
        from kvdsl import interp

        arrays = {}
        for name, r in bound.items():
            b = program.binding(name)
            dt = b.host.dtype
            raw = r.buffer.handle[r.offset : r.offset + r.size]
            arrays[name] = raw[: raw.size // dt.itemsize * dt.itemsize].view(dt).copy()
        out = interp.run(program.kernel, arrays, dict(params), groups)
        for name, a in out.items():
            r = bound[name]
            raw = a.view(np.uint8)
            r.buffer.handle[r.offset : r.offset + raw.size] = raw


class GpuHost(Host):
    """Device buffers on the runtime's default device (WebGPU's default limits, no features
    but timestamp queries); the dispatches of a step are encoded into one command buffer,
    submitted at :meth:`step` or before a write or read that must follow them, each submission
    between two timestamps where the adapter has ``timestamp-query``."""

    name = "gpu"
    QUERIES = 2048  # timestamp pairs resolved at once

    def __init__(self) -> None:
        from kvdsl.runtime import device as gpu

        self._gpu = gpu
        self._wgpu = gpu.wgpu_module()
        self.device = gpu.device()
        self.timestamps = "timestamp-query" in self.device.features
        self._pending: list[tuple] = []
        self._uniforms: dict[bytes, Any] = {}
        #: bind groups by their bindings: (the bound buffers, weakly; the group)
        self._groups: dict[tuple, tuple[tuple, Any]] = {}
        self._pairs: list[int] = []  # the step of each timestamp pair written
        self._resolved: list[float] = []  # GPU seconds of the pairs resolved so far
        self._steps = 0
        self._stamps = Timestamps(self.device, self.QUERIES) if self.timestamps else None
        self._warm_up()

    def _warm_up(self) -> None:
        """Encode and submit once what every step does (wgpu-py builds its C structures on first
        use, a second's work that would otherwise land in the first step's time)."""
        usage = self._wgpu.BufferUsage
        buf = self.device.create_buffer(size=ALIGN, usage=usage.STORAGE | usage.COPY_DST)
        self.device.queue.write_buffer(buf, 0, bytes(4))
        layout = self.device.create_bind_group_layout(
            entries=[
                {
                    "binding": 0,
                    "visibility": self._wgpu.ShaderStage.COMPUTE,
                    "buffer": {"type": "storage"},
                }
            ]
        )
        self.device.create_bind_group(layout=layout, entries=[buffer_entry(0, buf)])
        encoder = self.device.create_command_encoder()
        writes = None if self._stamps is None else self._stamps.writes(0)
        encoder.begin_compute_pass(timestamp_writes=writes).end()
        self.device.queue.submit([encoder.finish()])

    def _allocate(self, buf: Buffer) -> None:
        usage = self._wgpu.BufferUsage
        buf.handle = self.device.create_buffer(
            size=buf.size, usage=usage.STORAGE | usage.COPY_DST | usage.COPY_SRC
        )

    def write(self, buf: Buffer, offset: int, data: bytes | np.ndarray) -> None:
        self._submit()  # the dispatches encoded so far read the old contents
        raw = bytes(data) if isinstance(data, bytes) else np.ascontiguousarray(data).tobytes()
        if len(raw) % 4:
            raw += bytes(4 - len(raw) % 4)
        self.device.queue.write_buffer(buf.handle, offset, raw)

    def read(self, buf: Buffer) -> bytes:
        self._submit()
        return read_buffer(self.device, buf.handle)

    def _uniform(self, data: bytes) -> Any:
        if data not in self._uniforms:
            usage = self._wgpu.BufferUsage
            buf = self.device.create_buffer(size=len(data), usage=usage.UNIFORM | usage.COPY_DST)
            self.device.queue.write_buffer(buf, 0, data)
            self._uniforms[data] = buf
        return self._uniforms[data]

    def prepare(self, program: Program) -> None:
        self._pipeline(program)

    def _pipeline(self, program: Program) -> Any:
        pipe = self._gpu.pipeline(
            program.wgsl,
            program.kernel.bindings,
            True,
            program.name,
            limits=program.entry["limits"],
        )
        if pipe.device is not self.device:
            raise BufferError(
                f"{program.name} needs features {program.entry['features']} or limits "
                f"{program.entry['limits']}: a session keeps its buffers on the default device"
            )
        return pipe

    def _dispatch(self, program, bound, params, data, groups) -> None:
        pipe = self._pipeline(program)
        ranges = tuple((n, id(r.buffer), r.offset, r.size) for n, r in bound.items())
        key = (program.name, program.wgsl, ranges, data)
        held = self._groups.get(key)
        # A buffer's id is its own only while it lives: a group cached for a buffer since
        # dropped must not serve a new buffer given the same id (it would bind the old one).
        if held is not None and all(ref() is r.buffer for ref, r in zip(held[0], bound.values())):
            group = held[1]
        else:
            entries = [
                buffer_entry(b["binding"], r.buffer.handle, r.offset, r.size)
                for b in program.storage
                for r in [bound[b["name"]]]
            ]
            entries.append(buffer_entry(len(program.storage), self._uniform(data)))
            group = self.device.create_bind_group(layout=pipe.layout, entries=entries)
            self._groups = {k: v for k, v in self._groups.items() if all(r() for r in v[0])}
            self._groups[key] = (tuple(weakref.ref(r.buffer) for r in bound.values()), group)
        self._pending.append((pipe.pipeline, group, groups))

    def _submit(self) -> None:
        if not self._pending:
            return
        encoder = self.device.create_command_encoder()
        n = len(self._pending)
        pair = len(self._pairs) % self.QUERIES
        for i, (pipeline, group, groups) in enumerate(self._pending):
            writes = None
            if self._stamps is not None and (i == 0 or i == n - 1):
                writes = self._stamps.writes(pair, begin=i == 0, end=i == n - 1)
            encode_pass(encoder, pipeline, group, groups, writes)
        self.device.queue.submit([encoder.finish()])
        self._pending.clear()
        if self.timestamps:
            self._pairs.append(self._steps)
            if len(self._pairs) - len(self._resolved) == self.QUERIES:
                self._resolve()

    def _resolve(self) -> None:
        """Read the timestamp pairs written since the last resolve into GPU seconds."""
        count = len(self._pairs) - len(self._resolved)
        if count == 0:
            return
        ticks = self._stamps.ticks(len(self._resolved) % self.QUERIES, count)
        self._resolved.extend(self._stamps.seconds(ticks))

    def step(self) -> None:
        self._submit()
        self._steps += 1

    def gpu_seconds(self) -> list[float] | None:
        self._submit()
        if not self.timestamps:
            return None
        self._resolve()
        out = [0.0] * self._steps
        for step, seconds in zip(self._pairs, self._resolved):
            out[step] += seconds
        return out
