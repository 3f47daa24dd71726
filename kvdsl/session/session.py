"""A model's KV cache over the life of a conversation, on a host, beside its numpy oracle.

A :class:`Session` keeps, for each of ``layers`` layers, K and V caches of ``batch`` sequences ×
``kv_heads`` × ``capacity`` rows × ``head_dim`` in one format (:mod:`kvdsl.session.formats`),
and runs operations on every layer:

- ``prefill(lengths)``: each sequence restarts with a prompt of ``lengths[b]`` tokens (ragged,
  right-padded to the longest: rows past a prompt hold its padding until a later token lands
  there), ``seqlens_k = lengths - 1``, appended in place;
- ``decode()``: one token per sequence, appended in place at ``seqlens_k = lengths``;
- ``merge(n)``: ``n`` tokens per sequence through the buffer-sharing pair: the rows outside the
  window retained from the live buffer into the other one, the window appended there, and the
  other buffer made live;
- ``shift(n)``: one sliding-window step of ``n`` tokens from the live buffer into the other
  (float formats);
- ``read()``: the valid rows of every layer read back as f32 (the dense formats through
  ``dense_read``);
- ``fork(src, dst)``: sequence ``dst`` becomes a copy of ``src`` (its rows and its length),
  through ``copy`` into a scratch range and back into ``dst``'s batch (a buffer bound twice in
  one dispatch, once writable, is not WebGPU); a sequence's rows must be a multiple of 256
  bytes (WebGPU's storage offset alignment) for a range to start at it, else fork is refused
  (the paged session forks any cache: :mod:`kvdsl.session.paged`).

Past the capacity a sequence keeps counting tokens, and each kernel clamps as it documents
(``merge_share``'s window ends at the capacity; ``window_shift`` evicts). Each cache buffer holds
the cache between poisoned canary batches, one before and one after, that no dispatch may touch;
:meth:`Session.check` compares every layer's live buffer with the oracle (bit for bit; a dense
code may move by one step on a GPU) and every canary with its poison.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from kvdsl import reference
from kvdsl.kernels.dense import DenseFormat, format_of
from kvdsl.reference.judge import poison
from kvdsl.session.attention import BINDING, AttendLayer, attention
from kvdsl.session.formats import FORMATS, CacheFormat, Format, Pair, SessionError, Write
from kvdsl.session.formats import cache_format
from kvdsl.session.host import ALIGN, Bound, Buffer, InterpHost, aligned
from kvdsl.session.run import Run, SessionMismatch, whole

#: The built-in dense formats' names.
DENSE_FORMATS = tuple(f.value for f in DenseFormat)


@dataclass(frozen=True)
class Spec:
    """The cache of a model: ``layers`` × ``batch`` sequences × ``kv_heads`` × ``capacity`` rows
    × ``head_dim``, stored in ``format`` (a name, or a dense :class:`kvdsl.nodes.formats.Format`
    value)."""

    layers: int = 1
    batch: int = 2
    kv_heads: int = 2
    head_dim: int = 32
    capacity: int = 16
    format: str | Format = "f32"

    def __post_init__(self) -> None:
        whole("layers", self.layers, 1)
        whole("batch", self.batch, 1)
        whole("kv_heads", self.kv_heads, 1)
        whole("capacity", self.capacity, 1, 2**30)
        whole("head_dim", self.head_dim, 8)
        if not isinstance(self.format, Format) and self.format not in FORMATS:
            raise SessionError(f"format={self.format!r}: expected one of {', '.join(FORMATS)}")
        step = 8  # a dense format's row: whole code words or ggml blocks
        if isinstance(self.format, Format) or self.format in DENSE_FORMATS:
            step = max(step, format_of(self.format).elements_multiple())
        if self.head_dim % step:
            raise SessionError(
                f"head_dim={self.head_dim}: expected a multiple of {step} for format "
                f"{str(self.format)!r}"
            )
        if isinstance(self.format, Format) or self.format in DENSE_FORMATS:
            fmt = format_of(self.format)
            if not fmt.takes(self.head_dim):
                raise SessionError(
                    f"head_dim={self.head_dim}: expected {fmt.head_dims()} for format {fmt.name!r}"
                )


@dataclass
class _Layer:
    """One layer: two buffers each of K and V (the live one and the other), and the oracle."""

    k: tuple[Buffer, Buffer]
    v: tuple[Buffer, Buffer]
    model_k: np.ndarray
    model_v: np.ndarray
    live: int = 0


@dataclass
class Session(Run):
    """A cache on ``host`` (the interpreter unless given) and its oracle, checked after every
    operation where ``check`` (else on :meth:`check` calls); with ``q_heads`` (a multiple of
    ``kv_heads``), that many query heads attend over the cache after every decode
    (:mod:`kvdsl.session.attention`)."""

    spec: Spec

    def __post_init__(self) -> None:
        s = self.spec
        self.fmt: CacheFormat = cache_format(s.format, s.kv_heads, s.head_dim)
        self.input = self.fmt.input
        self._begin(self.fmt.programs())
        self.cache_bytes = s.batch * s.kv_heads * s.capacity * self.fmt.row_bytes
        if self.cache_bytes + aligned(s.kv_heads * s.capacity * self.fmt.row_bytes) > BINDING:
            most = BINDING // ((s.batch + 1) * s.kv_heads * self.fmt.row_bytes) - 1
            raise SessionError(
                f"capacity={s.capacity}: a layer's K cache is {self.cache_bytes} bytes, past "
                f"one binding's {BINDING} (WebGPU's default maxStorageBufferBindingSize); give "
                f"at most {most} rows"
            )
        self.canary = aligned(s.kv_heads * s.capacity * self.fmt.row_bytes)  # a batch, or more
        self.attention = None
        room = 0  # what attend's contract sizes its cache bindings past the cache
        if self.q_heads:
            constants, params = self.fmt.attend_inputs()
            self.attention = attention(
                self.host, name=self.fmt.name, fmt=s.format, q_heads=self.q_heads,
                kv_heads=s.kv_heads, head_dim=s.head_dim, batch=s.batch, layers=s.layers,
                seed=self.seed, constants=constants, params=params,
            )  # fmt: skip
            need = self.attention.cache_bytes({"batch": s.batch, "seq": s.capacity})
            room = max(0, need - self.cache_bytes)
        self._room = self.cache_bytes + room
        self._span = self.canary + aligned(self.cache_bytes)  # the cache and the trailing canary
        start = poison((s.batch, s.kv_heads, s.capacity, self.fmt.unit), self.fmt.dtype)
        self.layers = [
            _Layer(k, v, start.copy(), start.copy())
            for k, v in self._cache_buffers(
                self.cache_bytes, room, lambda buf, _: self.host.write(buf, self.canary, start)
            )
        ]
        self.seqlens = self.host.buffer("seqlens_k", 4 * s.batch)
        self._constants = {}  # the format's inputs that hold for the whole session
        for name, a in self.fmt.constants().items():
            buf = self.host.buffer(name, a.nbytes)
            self.host.write(buf, 0, a)
            self._constants[name] = Bound(buf, 0, a.nbytes)
        self._new: tuple[Buffer, Buffer] | None = None
        self._new_tokens = 0
        self._out: tuple[Buffer, Buffer] | None = None
        self._scratch: tuple[Buffer, Buffer] | None = None
        self.forks = 0

    # ---- buffers ---------------------------------------------------------------------------

    def _cache(self, layer: _Layer, which: int) -> Pair:
        # The interpreter binds the cache exactly (a stray access is OutOfBounds); the GPU binds
        # the trailing canary too, so that a write past the cache lands there (WebGPU would drop
        # or clamp one past the binding) and the check finds it.
        size = self.cache_bytes if isinstance(self.host, InterpHost) else self._span
        return Bound(layer.k[which], self.canary, size), Bound(layer.v[which], self.canary, size)

    def _seqlens(self, lens: np.ndarray) -> dict[str, Bound]:
        """The step's inputs: ``seqlens_k`` written for ``lens``, and the format's constants."""
        self.host.write(self.seqlens, 0, np.asarray(lens, np.int32))
        return {"seqlens_k": Bound(self.seqlens, 0, 4 * self.spec.batch)} | self._constants

    # ---- operations ------------------------------------------------------------------------

    def prefill(self, lengths) -> None:
        """Restart each sequence with a prompt of ``lengths[b]`` tokens (0 to the capacity)."""
        lengths = self._prompts(lengths)
        key_seq = max(lengths)
        self._append("prefill", np.array(lengths, np.int64) - 1, key_seq)
        self.lengths = np.array(lengths, np.int64)

    def decode(self) -> None:
        """One token per sequence (then attention, where ``q_heads``)."""
        self._append("decode", self.lengths.copy(), 1)
        self.lengths += 1
        if self.attention is not None:
            self._attend()

    def merge(self, n: int) -> None:
        """``n`` tokens per sequence through the buffer-sharing pair (retain, then append)."""
        n = whole("n", n, 1, self.spec.capacity)
        self._append("merge", self.lengths + n - 1, n, swap=True)
        self.lengths += n

    def shift(self, n: int) -> None:
        """One sliding-window step of ``n`` tokens per sequence (float formats)."""
        n = whole("n", n, 1, self.spec.capacity)
        if not self.fmt.shifts:
            raise SessionError(
                f"shift: format={self.fmt.name!r} has no sliding-window kernel "
                "(window_shift moves f32 and f16 caches): give f32 or f16"
            )
        lens = self.lengths + n - 1
        self._check_positions(lens)
        tokens = self._tokens(n)  # the model's output: not the host's overhead
        t = time.perf_counter()
        new = self._write_tokens(tokens, n)
        write = Write(self.host, self._seqlens(lens), lens, n, self.spec.capacity)
        for layer, pair in zip(self.layers, new):
            past, present = self._cache(layer, layer.live), self._cache(layer, 1 - layer.live)
            self.fmt.shift(write, past, present, pair)
            layer.live = 1 - layer.live
        self._step("shift", n, t)
        s = self.spec
        for layer, (k, v) in zip(self.layers, tokens):
            shape = (s.batch, s.kv_heads, s.capacity, s.head_dim)
            w = reference.window_shift(
                layer.model_k.reshape(shape), layer.model_v.reshape(shape), k, v, lens, "all"
            )
            layer.model_k, layer.model_v = w.key, w.value
        self.lengths += n
        self._after()

    def fork(self, src: int, dst: int) -> None:
        """Sequence ``dst`` becomes a copy of sequence ``src``: its rows in every layer, and
        its length."""
        s = self.spec
        src, dst = self._fork_pair(src, dst)
        per = s.kv_heads * s.capacity * self.fmt.row_bytes
        if per % ALIGN:
            raise SessionError(
                f"fork: a sequence's rows are {per} bytes (kv_heads × capacity × "
                f"{self.fmt.row_bytes} bytes a row), not a multiple of {ALIGN} (WebGPU's "
                "storage offset alignment), so no range can start at one: give a capacity "
                "that makes them so, or a paged cache"
            )
        t = time.perf_counter()
        if self._scratch is None:
            self._scratch = (self.host.buffer("fork_k", per), self.host.buffer("fork_v", per))
        scratch = (Bound(self._scratch[0], 0, per), Bound(self._scratch[1], 0, per))
        rows = s.kv_heads * s.capacity
        for layer in self.layers:
            k, v = layer.k[layer.live], layer.v[layer.live]
            at = [(Bound(k, self.canary + b * per, per), Bound(v, self.canary + b * per, per))
                  for b in (src, dst)]  # fmt: skip
            self.fmt.copy(self.host, at[0], scratch, rows)
            self.fmt.copy(self.host, scratch, at[1], rows)
        self._step("fork", 0, t)
        for layer in self.layers:
            layer.model_k[dst] = layer.model_k[src]
            layer.model_v[dst] = layer.model_v[src]
        self.lengths[dst] = self.lengths[src]
        self.forks += 1
        self._after()

    def read(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """Every layer's K and V as f32 ``[batch, kv_heads, capacity, head_dim]``, checked
        against the oracle's rows decoded."""
        s = self.spec
        t = time.perf_counter()
        rows = s.batch * s.kv_heads * s.capacity
        out = []
        for i, layer in enumerate(self.layers):
            cache = self._cache(layer, layer.live)
            if self.fmt.dtype.kind == "f":
                got = [self._live(b) for b in (cache[0], cache[1])]
                got = [g.astype(np.float32) for g in got]
            elif not self.fmt.reads:  # no read kernel: the reference decodes the stored rows
                got = [
                    self.fmt.decode(self._live(b).reshape(-1, self.fmt.unit), j).reshape(-1)
                    for j, b in enumerate(cache)
                ]
            else:
                size = 4 * rows * s.head_dim
                if self._out is None:
                    self._out = (self.host.buffer("key", size), self.host.buffer("value", size))
                bound = (Bound(self._out[0], 0, size), Bound(self._out[1], 0, size))
                self.fmt.read(self.host, cache, bound, rows)
                got = [np.frombuffer(self.host.read(b.buffer), np.float32)[: rows * s.head_dim]
                       for b in bound]  # fmt: skip
                # The GPU's stored words decoded by the reference: what dense_read must give.
                for j, r in enumerate(cache):
                    stored = self._live(r).reshape(-1, self.fmt.unit)
                    want = self.fmt.decode(stored, j).reshape(-1)
                    g = got[j].reshape(-1)
                    same = (g == want) | (np.isnan(g) & np.isnan(want))
                    asym = self.fmt.asymmetric  # q * scale + zero: maybe one fma
                    near = np.abs(g - want) <= 1e-6 * (1 + np.abs(want)) if asym else same
                    if not (same | near).all():
                        at = int(np.flatnonzero(~(same | near))[0])
                        raise SessionMismatch(
                            f"read, layer {i}: {'key' if j == 0 else 'value'} element {at} is "
                            f"{g[at]!r}, the stored row decodes to {want[at]!r}"
                        )
            out.append(tuple(g.reshape(s.batch, s.kv_heads, s.capacity, s.head_dim) for g in got))
        self._step("read", 0, t)
        self._after()
        return out

    def _append(self, op: str, lens: np.ndarray, key_seq: int, swap: bool = False) -> None:
        self._check_positions(lens)
        t = time.perf_counter()
        s = self.spec
        if key_seq == 0:  # every prompt empty: nothing to write
            self._step(op, 0, t)
            self._after()
            return
        tokens = self._tokens(key_seq)  # the model's output: not the host's overhead
        t = time.perf_counter()
        new = self._write_tokens(tokens, key_seq)
        write = Write(self.host, self._seqlens(lens), lens, key_seq, s.capacity)
        for layer, pair in zip(self.layers, new):
            target = 1 - layer.live if swap else layer.live
            present = self._cache(layer, target)
            if swap:
                self.fmt.retain(write, self._cache(layer, layer.live), present)
            self.fmt.append(write, present, pair)
            layer.live = target
        self._step(op, key_seq, t)
        start, _ = reference.share_window(lens, key_seq, s.capacity)
        for layer, (k, v) in zip(self.layers, tokens):
            for side, (model, new_rows) in enumerate(((layer.model_k, k), (layer.model_v, v))):
                rows = self.fmt.encode(reference.split_heads(new_rows, s.kv_heads), side)
                for b in range(s.batch):
                    model[b, :, start[b] : start[b] + key_seq] = rows[b]
        self._after()

    def _attend_inputs(self, oracle: bool) -> tuple:
        # A sequence attends over the rows it holds: past the capacity, the last row is
        # rewritten (merge_share) or the window slid (window_shift), and the rows are capacity.
        s = self.spec
        exact = isinstance(self.host, InterpHost)
        lengths = np.minimum(self.lengths, s.capacity)
        # Rows past the longest sequence are never attended: they are neither read nor decoded.
        held = int(lengths.max())
        layers = []
        for layer in self.layers:
            cache = self._cache(layer, layer.live)
            rows: list[np.ndarray | None] = [None, None]
            for side, (r, model) in enumerate(zip(cache, (layer.model_k, layer.model_v))):
                if not oracle:
                    continue
                stored = self._held(model, held)
                if not exact:  # the codes the check accepts (a dense one may move by a step)
                    got = self._held(self._live(r), held)
                    stored = got if not self.fmt.judge(got, stored, exact) else stored
                decoded = self.fmt.attended(
                    self.fmt.decode(stored.reshape(-1, self.fmt.unit), side)
                )
                rows[side] = decoded.reshape(s.batch, s.kv_heads, held, s.head_dim)
            # The contract's size for the binding (the room after the cache holds canaries).
            size = max(cache[0].size, self._room)
            bound = {n: Bound(r.buffer, r.offset, size) for n, r in zip(("key", "value"), cache)}
            layers.append(AttendLayer(bound, *rows))
        return lengths, lengths, layers, {"seq": s.capacity}, {"seq": s.capacity}

    def _check_positions(self, lens: np.ndarray) -> None:
        top = int(np.max(lens))
        if top > 2**31 - 1:
            raise SessionError(
                f"seqlens_k={top}: a sequence past i32's 2147483647 tokens cannot be addressed"
            )

    # ---- checks ----------------------------------------------------------------------------

    def _held(self, stored: np.ndarray, rows: int) -> np.ndarray:
        """The first ``rows`` rows of each ``(batch, kv head)`` of a layer's stored values."""
        s = self.spec
        return np.ascontiguousarray(
            stored.reshape(s.batch, s.kv_heads, s.capacity, -1)[:, :, :rows]
        )

    def _live(self, r: Bound) -> np.ndarray:
        raw = self.host.read(r.buffer)
        return np.frombuffer(raw[r.offset : r.offset + self.cache_bytes], self.fmt.dtype)

    def check(self) -> None:
        """Raise :class:`SessionMismatch` unless every layer's live K and V equal the oracle's
        and every canary of both buffers of each holds its bytes."""
        exact = isinstance(self.host, InterpHost)
        end = self.canary + self.cache_bytes
        for where, layer, side, which, body in self._read_back(end, "cache"):
            if which != layer.live:
                continue
            model = layer.model_k if side == "key" else layer.model_v
            problem = self.fmt.judge(np.frombuffer(body, self.fmt.dtype), model.reshape(-1), exact)
            if problem:
                raise SessionMismatch(f"{where}: {problem}")
        self.checks += 1
