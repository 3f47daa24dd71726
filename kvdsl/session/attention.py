"""Decode attention in a session: after each decode step's cache write, ``attend`` (and
``attend_merge`` where the chunk plan needs more than one chunk) over every layer's cache,
checked against float64 attention over the oracle's rows.

One :class:`Attention` serves a contiguous and a paged session alike: the session names its
cache's layout (:func:`attention`), and at each step hands over, per layer, the bound cache
(the live K and V buffers, or pools with the page table) and the oracle's rows of each
sequence, decoded by the reference decoders as f32 ``[batch, kv_heads, rows, head_dim]`` with
the sequence's rows first (a paged sequence's released pages left out). The step draws random,
never-zero queries ``[batch, q_heads, 1, head_dim]`` (f32, BNSH) for each layer and a scale
near ``1 / sqrt(head_dim)``, picks the chunks by :func:`kvdsl.kernels.attend.plan`, poisons
the outputs and partials, dispatches, and compares each layer's output with
:func:`kvdsl.reference.attention.attention` over the oracle's rows within
:data:`kvdsl.reference.judge.ATTENTION_TOL` (the attend cases' tolerance: approximate ``exp``
and f32 sums). The queries come from their own generator, so a session draws the same tokens
with attention on or off.

The kernels are built from :class:`~kvdsl.kernels.attend.AttendConfig` for the session's own
format and layout, with the smallest workgroups from :data:`WORKGROUP` invocations up (whole
output rows) whose kernel needs no limit past WebGPU's defaults: a chunk holds at least a
workgroup's keys, so a session's short sequences split into several chunks and the merge runs
too. The template's int8 and int4 caches (contiguous only) are read with ``kv_scale``, one
``(k, v)`` pair of the scales the session's ``append_quant`` writes with (``perChannel`` 0),
the pair the oracle's rows are decoded with.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import Mapping, Sequence

import numpy as np

from kvdsl.contract import ContractError, buffer_sizes
from kvdsl.kernels.attend import AttendConfig, CacheLayout, plan
from kvdsl.kernels.attend.config import merge_config
from kvdsl.kernels.config import ConfigError, Element
from kvdsl.kernels.dense import Format
from kvdsl.kernels.paged import PageLayout
from kvdsl.reference.attention import attention as reference
from kvdsl.reference.judge import ATTENTION_TOL, compare, poison, values
from kvdsl.runtime.errors import BufferError
from kvdsl.session.formats import SessionError
from kvdsl.session.host import Bound, Buffer, Host, Program, aligned

#: WebGPU's default maxStorageBufferBindingSize: a layer's K (or V) cache is bound whole.
BINDING = 2**27
#: The bindings of a cache's rows (contiguous, then paged).
CACHE = ("key", "value", "key_pages", "value_pages")
#: The least invocations of a session's ``attend`` workgroup (a chunk's least keys).
WORKGROUP = 8


@dataclass(frozen=True)
class AttendLayer:
    """One layer's part of an attention step: the cache's ranges by binding name, and the
    oracle's K and V rows, f32 ``[batch, kv_heads, rows, head_dim]`` (None on a step whose
    output is not checked)."""

    bound: Mapping[str, Bound]
    k: np.ndarray | None
    v: np.ndarray | None


def attention(
    host: Host,
    *,
    name: str,
    fmt: str | Format,
    q_heads: int,
    kv_heads: int,
    head_dim: int,
    batch: int,
    layers: int,
    seed: int,
    page_size: int | None = None,
    page_layout: str = "nhd",
    constants: Mapping[str, np.ndarray] | None = None,
    params: Mapping[str, int] | None = None,
) -> Attention:
    """The attention step of a session whose cache is format ``fmt`` (``name`` in messages),
    contiguous BNSH or, with ``page_size``, paged (separate pools, ``page_layout`` inside a
    page), ``attend`` binding ``constants`` (arrays by binding name: the template's
    ``kv_scale``) and told ``params`` (each a shape key too: the template's ``perChannel``) at
    every step, as the format says (:meth:`~kvdsl.session.formats.CacheFormat.attend_inputs`);
    refused (:class:`SessionError`, one line naming the format) where ``attend`` has no reader
    of it or its config is refused."""
    fields: dict = {}
    if fmt in ("f32", "f16"):
        fields["cache_type"] = Element(fmt)
    else:
        fields["format"] = fmt
    if page_size is not None:
        fields |= {"cache": CacheLayout.PAGED, "page_size": page_size}
        fields["page_layout"] = PageLayout(page_layout)
    where = "paged" if page_size is not None else "contiguous"
    if not isinstance(q_heads, int) or q_heads < 1 or q_heads % kv_heads:
        raise SessionError(
            f"q_heads={q_heads!r}: expected a whole multiple of kv_heads ({kv_heads})"
        )
    try:
        cfg, attend, merge = _programs(
            name, fmt, q_heads, kv_heads, head_dim, tuple(fields.items())
        )
    except (ConfigError, ContractError) as err:
        raise SessionError(
            f"attention: format={name!r} ({where}) has no attend kernel a session can run: {err}"
        ) from None
    return Attention(host, cfg, attend, merge, batch, layers, seed, constants, params)


@functools.lru_cache(maxsize=64)
def _programs(
    name: str, fmt: str | Format, q_heads: int, kv_heads: int, head_dim: int, fields: tuple
) -> tuple[AttendConfig, Program, Program]:
    """The config and programs of :func:`attention`: the fewest query rows a workgroup holds
    (``max_queries`` 1, else 2) and the least workgroup of whole output rows from
    :data:`WORKGROUP` up (eight sizes, then the default) whose kernel runs at WebGPU's default limits (a session's buffers live
    on the default device), else the default workgroup."""
    kw = dict(fields)
    where = "paged" if kw.get("cache") is CacheLayout.PAGED else "contiguous"
    tag = f"{name}_{where}_{q_heads}q{kv_heads}x{head_dim}"
    lanes = head_dim // 4  # output rows of units of 4 values or 8: whole ones either way
    first = lanes * -(-WORKGROUP // lanes)
    for queries in (1, 2):
        probe = AttendConfig(kv_heads, head_dim, q_heads, **kw, max_queries=queries)
        for size in [*range(first, probe.workgroup_size, lanes)[:8], probe.workgroup_size]:
            cfg = replace(probe, workgroup_size=size)
            attend = Program.of(cfg, f"session_attend_{tag}")
            if not attend.entry["limits"]:
                return cfg, attend, Program.of(merge_config(cfg), f"session_attend_merge_{tag}")
    return cfg, attend, Program.of(merge_config(cfg), f"session_attend_merge_{tag}")


@dataclass(frozen=True)
class Sent:
    """What :meth:`Attention.dispatch` sent that :meth:`Attention.check` needs: each layer's
    random queries, the scale and the chunks the keys took."""

    queries: list[np.ndarray]
    scale: float
    chunks: int


class Attention:
    """``attend`` and ``attend_merge`` for one session's cache, their query, output and
    partials buffers, the format's constant inputs and params, and the step: :meth:`dispatch`
    (what a runtime does, and what a session times) then :meth:`check` (the oracle's part)."""

    def __init__(
        self,
        host: Host,
        cfg: AttendConfig,
        attend: Program,
        merge: Program,
        batch: int,
        layers: int,
        seed: int,
        constants: Mapping[str, np.ndarray] | None = None,
        params: Mapping[str, int] | None = None,
    ) -> None:
        self.host, self.cfg, self.attend, self.merge = host, cfg, attend, merge
        self.batch, self.layers = batch, layers
        for program in (attend, merge):
            try:
                host.prepare(program)
            except BufferError as err:  # a limit past the default device's
                raise SessionError(f"attention: {err}") from None
        # Their own generator: the session's tokens are the same with attention on or off.
        self.rng = np.random.default_rng(2**32 + seed)
        self.q_rows = batch * cfg.q_heads  # query (and output) rows of a layer
        self.per = aligned(4 * self.q_rows * cfg.head_dim)  # a layer's range of query and output
        self.query = host.buffer("attend_query", layers * self.per)
        self.output = host.buffer("attend_output", layers * self.per)
        self.seqlens = host.buffer("attend_seqlens_k", 4 * batch)
        self.partials: Buffer | None = None
        self.params = dict(params or {})  # the format's: the contract's shape keys too
        self.constants: dict[str, Bound] = {}
        for name, a in (constants or {}).items():
            a = np.ascontiguousarray(a)
            buf = host.buffer(f"attend_{name}", a.nbytes)
            host.write(buf, 0, a)
            self.constants[name] = Bound(buf, 0, a.nbytes)
        self.runs = self.merges = 0  # steps run, and those whose keys took several chunks
        self.checked = 0  # steps read back and checked (:meth:`check`)

    def cache_bytes(self, shape: Mapping[str, int]) -> int:
        """The bytes the contract sizes each cache binding for the cache's ``shape`` (``batch``
        and ``seq``, or ``pages``): a session's cache buffers hold at least them."""
        full = {"queries": 1, "chunk": 1, "chunks": 1} | self.params | dict(shape)
        sizes = buffer_sizes(self.attend.entry, full)
        need = max(sizes[b["name"]] for b in self.attend.storage if b["name"] in CACHE)
        if need > BINDING:
            rows = self.cfg.format_name or self.cfg.cache_type.value
            raise SessionError(
                f"attention: attend's contract sizes a layer's {rows} cache binding {need} "
                f"bytes for {dict(shape)}, past one binding's {BINDING} "
                "(WebGPU's default maxStorageBufferBindingSize): give a smaller cache"
            )
        return need

    def _partials(self, chunks: int) -> Bound:
        size = 4 * self.q_rows * chunks * (self.cfg.head_dim + 4)
        if self.partials is None or self.partials.size < size:
            self.partials = self.host.buffer("attend_partials", size)
        self.host.write(self.partials, 0, poison(size // 4, np.float32))
        return Bound(self.partials, 0, size)

    def dispatch(
        self,
        lengths: np.ndarray,
        layers: Sequence[AttendLayer],
        shape: Mapping[str, int],
        params: Mapping[str, int],
        inputs: Mapping[str, np.ndarray] | None = None,
    ) -> Sent:
        """One step over every layer, written, dispatched and submitted: sequence ``b``'s new
        token sits at position ``lengths[b] - 1`` (``seqlens_k``); ``shape`` and ``params`` add
        the cache's (``seq``, or ``pages`` and ``maxPages``), ``inputs`` the page table. The
        random queries, the scale and the chunks go to :meth:`check`."""
        cfg, host = self.cfg, self.host
        lengths = np.asarray(lengths, np.int64)
        d = cfg.head_dim
        q = [values(self.rng, (self.batch, cfg.q_heads, 1, d), np.float32) for _ in layers]
        scale = float(np.float32(self.rng.uniform(0.5, 1.5) / np.sqrt(d)))
        split = plan(cfg, batch=self.batch, queries=1, longest=int(lengths.max()))
        chunks = split["chunks"]
        seqlens = (lengths - 1).astype(np.int32)
        host.write(self.seqlens, 0, seqlens)
        host.write(self.query, 0, b"".join(self._padded(x) for x in q))
        host.write(self.output, 0, poison(self.layers * self.per // 4, np.float32))
        partials = self._partials(chunks)
        size = 4 * self.q_rows * d
        full = self.params | dict(shape) | {"batch": self.batch, "queries": 1}
        full |= {"chunk": split["chunk"], "chunks": chunks}
        given = self.params | dict(params) | split | {"scale": scale}
        for i, layer in enumerate(layers):
            out = Bound(self.output, i * self.per, size)
            bound = dict(layer.bound) | self.constants
            bound["seqlens_k"] = Bound(self.seqlens, 0, 4 * self.batch)
            bound |= {"query": Bound(self.query, i * self.per, size), "output": out}
            bound["partials"] = partials
            host.dispatch(self.attend, bound, full, given, seqlens, inputs)
            if chunks > 1:
                host.dispatch(
                    self.merge,
                    {"partials": partials, "output": out},
                    {"batch": self.batch, "queries": 1, "chunks": chunks},
                    {"batch": self.batch, "queries": 1, "chunks": chunks},
                )
        host.step()
        self.runs += 1
        self.merges += chunks > 1
        return Sent(q, scale, chunks)

    def check(self, where: str, sent: Sent, rows: np.ndarray, layers: Sequence[AttendLayer]) -> str:
        """The step :meth:`dispatch` sent, read back: each layer's output against the
        reference's over the ``rows[b]`` first rows of sequence ``b``'s oracle rows (its own the
        last: ``rows`` is the lengths but where a paged sequence's released pages are left out).
        Returns '' when every layer's output is the reference's, else ``where``'s mismatch
        naming the layer."""
        q, scale, chunks, d = sent.queries, sent.scale, sent.chunks, self.cfg.head_dim
        self.checked += 1
        raw = np.frombuffer(self.host.read(self.output), np.float32)
        for i, layer in enumerate(layers):
            got = raw[i * self.per // 4 :][: self.q_rows * d]
            want = reference(q[i], layer.k, layer.v, rows, scale=scale)
            _, problem = compare(got, want.reshape(-1), ATTENTION_TOL)
            if problem:
                merged = f", {chunks} chunks merged" if chunks > 1 else ""
                return (
                    f"after {where}: layer {i} output (over {list(map(int, rows))} rows{merged}): "
                    f"{problem}"
                )
        return ""

    def _padded(self, q: np.ndarray) -> bytes:
        raw = np.ascontiguousarray(q, np.float32).tobytes()
        return raw + bytes(self.per - len(raw))
