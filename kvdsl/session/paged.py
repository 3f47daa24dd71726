"""A model's KV cache in pages, on a host, beside its numpy oracle.

A :class:`PagedSession` keeps, for each of ``layers`` layers, K and V pools of ``pages`` pages
(:mod:`kvdsl.nodes.paged`: ``page_size`` tokens of every KV head, ``nhd`` or ``hnd`` inside a
page, rows of f32, f16 or a dense format) and one page table per sequence, shared by every
layer (``max_pages`` entries, ``-1`` where a sequence has no page). Its host owns what a
serving engine's block manager owns: a free list of pages and a reference count per page
(:class:`~kvdsl.session.pages.PageAllocator`, the session's ``alloc``). The spec, how the rows
are stored and the programs that move them are :mod:`kvdsl.session.paged_rows`'s. The
operations, each on every layer through the catalog's paged kernels and their host contract
alone:

- ``prefill(lengths)``: each sequence releases its pages and restarts with a prompt of
  ``lengths[b]`` tokens in fresh pages (``paged_append``; right padding skipped);
- ``extend(n)`` (``decode()`` is ``extend(1)``): ``n`` tokens per sequence, new pages taken from
  the free list as a sequence crosses into them; a shared page about to be written is first
  copied to a page of the sequence's own (copy-on-write, ``paged_copy``);
- ``fork(src, dst)``: sequence ``dst`` releases its pages and shares ``src``'s (each page's count
  goes up; no row moves);
- ``compact()``: the owned pages gathered into a dense prefix of the other pools
  (``paged_compact``), the tables rewritten to the new ids, the free list the rest;
- ``window(w)``: every sequence keeps its last ``w`` tokens: ``paged_window`` rewrites the page
  table and names the released pages, which go back to the free list once no sequence holds
  them;
- ``read()``: every position of every sequence gathered back as f32 (``paged_read``), through the
  page table or, with ``addressing="slot_mapping"``, through the slots the host maps.

Every input the host passes is checked before dispatch (:func:`check_pages`: slots and page ids
inside the pool or ``-1``, no slot twice, no shared page written, copy pairs that make one
pass, a compaction that is a permutation; and the contract's sizes for the largest id). The
oracle holds every page of both pools of every layer, so a write to a page no sequence owns
(the free pages: at least two at every step) is a mismatch, as is a write to the canary bytes
around each pool. :meth:`PagedSession.check` compares them after every operation.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from kvdsl.reference import paged as ref
from kvdsl.reference.judge import poison
from kvdsl.session.attention import AttendLayer, attention
from kvdsl.session.formats import SessionError
from kvdsl.session.host import ALIGN, Bound, Buffer, InterpHost
from kvdsl.session.paged_rows import PagedSpec, check_pages, paged_rows
from kvdsl.session.pages import PageAllocator
from kvdsl.session.run import Run, SessionMismatch, whole


@dataclass
class _PagedLayer:
    """One layer: two pools each of K and V (the live one and the other), and their oracle."""

    k: tuple[Buffer, Buffer]
    v: tuple[Buffer, Buffer]
    model_k: list[np.ndarray]  # [pages, P, H, unit] of each of the two pools
    model_v: list[np.ndarray]
    seq_k: np.ndarray  # [batch, capacity, H, unit]: each sequence's stored rows by position
    seq_v: np.ndarray
    live: int = 0


@dataclass
class PagedSession(Run):
    """A paged cache on ``host`` (the interpreter unless given) and its oracle, checked after
    every operation where ``check_every``; with ``q_heads`` (a multiple of ``kv_heads``), that
    many query heads attend over each sequence's pages after every decode
    (:mod:`kvdsl.session.attention`)."""

    spec: PagedSpec

    def __post_init__(self) -> None:
        s = self.spec
        self.rows = paged_rows(s)
        self.input = self.rows.input
        self._begin(self.rows.programs())
        self.pages = s.pool_pages
        self.alloc = PageAllocator(self.pages, s.batch, s.max_pages, self.rng)
        self.forks = self.copies = self.compactions = 0
        self.pool_bytes = self.pages * self.rows.page_values * self.rows.dtype.itemsize
        self.canary = 4 * ALIGN
        self.attention = None
        room = 0  # what attend's contract sizes its pool bindings past the pool
        if self.q_heads:
            self.attention = attention(
                self.host, name=s.format, fmt=s.format, q_heads=self.q_heads,
                kv_heads=s.kv_heads, head_dim=s.head_dim, batch=s.batch, layers=s.layers,
                seed=self.seed, page_size=s.page_size, page_layout=s.layout,
            )  # fmt: skip
            shape = {"batch": s.batch, "pages": self.pages, "maxPages": s.max_pages}
            room = max(0, self.attention.cache_bytes(shape) - self.pool_bytes)
        self._room = self.pool_bytes + room
        shape = (self.pages, s.page_size, s.kv_heads, self.rows.unit)
        starts: list[np.ndarray] = []  # each buffer's: layer by layer, K's two, then V's

        def fill(buf: Buffer, fences: np.random.Generator) -> None:
            # Every page starts as noise of its own pool (a page copied from another pool, or a
            # row from another page, shows): finite values, or words.
            if self.rows.dtype.kind == "f":
                start = fences.uniform(-8, 8, shape).astype(self.rows.dtype)
            else:
                start = fences.integers(0, 2**32, shape, np.uint32)
            self.host.write(buf, self.canary, self._pool_array(start))
            starts.append(start)

        self.layers: list[_PagedLayer] = []
        for i, (k, v) in enumerate(self._cache_buffers(self.pool_bytes, room, fill)):
            rows = np.zeros((s.batch, s.capacity, s.kv_heads, self.rows.unit), self.rows.dtype)
            model_k, model_v = starts[4 * i : 4 * i + 2], starts[4 * i + 2 : 4 * i + 4]
            self.layers.append(_PagedLayer(k, v, model_k, model_v, rows, rows.copy()))
        # Which positions each sequence holds rows of (the page-independent half of the
        # oracle: what a sequence reads, whatever pages the host gave it).
        self.held = np.zeros((s.batch, s.capacity), bool)
        self._inputs: dict[str, Buffer] = {}
        self._new: tuple[Buffer, Buffer] | None = None
        self._new_tokens = 0

    # ---- buffers ---------------------------------------------------------------------------

    def _pool_array(self, pool: np.ndarray) -> np.ndarray:
        """A pool ``[pages, P, H, unit]`` as its binding lays it out."""
        return ref.pool_arrays(pool, pool, self.spec.layout, "separate")[0]

    def _pool_of(self, flat: np.ndarray) -> np.ndarray:
        """The inverse of :meth:`_pool_array`."""
        s = self.spec
        return ref.pool_pages(
            (flat, flat), s.kv_heads, s.page_size, self.rows.unit, s.layout, "separate"
        )[0]

    def _pool(self, layer: _PagedLayer, which: int) -> tuple[Bound, Bound]:
        # The interpreter binds each pool exactly (a stray access is OutOfBounds); the GPU binds
        # the trailing canary too, so that a write past the pool lands there.
        exact = isinstance(self.host, InterpHost)
        size = self.pool_bytes if exact else layer.k[which].size - self.canary
        return Bound(layer.k[which], self.canary, size), Bound(layer.v[which], self.canary, size)

    def _input(self, name: str, data: np.ndarray) -> Bound:
        """``data`` (i32) written to the host's buffer ``name`` (grown to fit)."""
        data = np.ascontiguousarray(data, np.int32).reshape(-1)
        size = max(data.nbytes, 4)
        buf = self._inputs.get(name)
        if buf is None or buf.size < size:
            buf = self._inputs[name] = self.host.buffer(name, size)
        self.host.write(buf, 0, data)
        return Bound(buf, 0, data.nbytes)

    # ---- operations ------------------------------------------------------------------------

    def prefill(self, lengths) -> None:
        """Restart each sequence with a prompt of ``lengths[b]`` tokens (0 to the capacity)."""
        lengths = self._prompts(lengths)
        new = np.array(lengths, np.int64)
        t = time.perf_counter()
        for b in range(self.spec.batch):
            self.alloc.release(b)
            self.held[b] = False
        self._write("prefill", new, max(lengths), t)

    def decode(self) -> None:
        """One token per sequence (then attention, where ``q_heads``)."""
        self.extend(1)
        if self.attention is not None:
            self._attend()

    def extend(self, n: int) -> None:
        """``n`` tokens per sequence."""
        s = self.spec
        n = whole("n", n, 1, s.capacity)
        top = int(self.lengths.max()) + n
        if top > s.capacity:
            b = int(np.argmax(self.lengths))
            raise SessionError(
                f"extend: sequence {b} would hold {top} tokens, past its page table's "
                f"{s.max_pages} pages of {s.page_size} ({s.capacity} tokens): give n at most "
                f"{s.capacity - int(self.lengths.max())}"
            )
        self._write("decode" if n == 1 else "extend", self.lengths + n, n, time.perf_counter())

    def fork(self, src: int, dst: int) -> None:
        """Sequence ``dst`` becomes a fork of ``src``: it releases its pages and holds
        ``src``'s (a later write to a shared page copies it first)."""
        src, dst = self._fork_pair(src, dst)
        t = time.perf_counter()
        self.alloc.share(src, dst)
        self.lengths[dst] = self.lengths[src]
        self.held[dst] = self.held[src]
        for layer in self.layers:
            layer.seq_k[dst], layer.seq_v[dst] = layer.seq_k[src], layer.seq_v[src]
        self.forks += 1
        self._step("fork", 0, t)
        self._after()

    def compact(self) -> None:
        """The owned pages gathered into pages ``0 .. n-1`` of the other pools, in the order
        the tables first name them; the tables rewritten, the free list the rest."""
        t = time.perf_counter()
        live = self.alloc.owned()
        n = len(live)
        if n:
            check_pages(self.pages, self.spec.page_size, live_pages=live)
            bound_live = self._input("live_pages", live)
            program = self.rows.compact
            shape = {"pages": self.pages, "live": n}
            for layer in self.layers:
                past, present = self._pool(layer, layer.live), self._pool(layer, 1 - layer.live)
                bound = {"live_pages": bound_live, "key_pages": past[0], "value_pages": past[1]}
                bound |= {"compact_key": present[0], "compact_value": present[1]}
                self.host.dispatch(program, bound, shape, {"count": n}, inputs={"live_pages": live})
                for model in (layer.model_k, layer.model_v):
                    model[1 - layer.live][:n] = model[layer.live][live]
                layer.live = 1 - layer.live
            self.alloc.compacted(live)
        self.compactions += 1
        self._step("compact", 0, t)
        self._after()

    def window(self, w: int) -> None:
        """Every sequence keeps its last ``w`` tokens: ``paged_window`` releases the pages
        wholly before them (entries ``-1``); the host frees those no sequence holds."""
        s = self.spec
        w = whole("w", w, 1, 2**31 - 1)
        t = time.perf_counter()
        seqlens = (self.lengths - 1).astype(np.int32)
        entries = self.alloc.table
        check_pages(self.pages, s.page_size, page_table=entries)
        table = self._input("page_table", entries)
        freed = self._input("freed_pages", poison(entries.size, np.int32).view(np.int32))
        lens = self._input("seqlens_k", seqlens)
        m = s.max_pages
        self.host.dispatch(
            self.rows.window,
            {"seqlens_k": lens, "page_table": table, "freed_pages": freed},
            {"batch": s.batch, "maxPages": m, "window": w},
            {"count": s.batch * m, "maxPages": m, "window": w},
            seqlens,
        )
        got_table = np.frombuffer(self.host.read(table.buffer), np.int32)[: entries.size]
        got_freed = np.frombuffer(self.host.read(freed.buffer), np.int32)[: entries.size]
        want_table, want_freed = ref.window(entries, seqlens, w, s.page_size)
        for what, got, want in (("page_table", got_table, want_table), ("freed_pages", got_freed, want_freed)):  # fmt: skip
            if not np.array_equal(got, want.reshape(-1)):
                at = int(np.flatnonzero(got != want.reshape(-1))[0])
                raise SessionMismatch(
                    f"window({w}): {what}[{at}] is {int(got[at])}, the oracle's "
                    f"{int(want.reshape(-1)[at])}"
                )
        self.alloc.table = got_table.reshape(entries.shape).copy()
        self.held &= np.repeat(self.alloc.table >= 0, s.page_size, axis=1)
        self.alloc.release_pages(got_freed)
        self._step("window", 0, t)
        self._after()

    def read(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """Every layer's K and V as f32 ``[batch, kv_heads, capacity, head_dim]`` (positions a
        sequence does not hold: NaN), gathered by ``paged_read`` and checked against the
        stored rows decoded."""
        s = self.spec
        t = time.perf_counter()
        seq = s.capacity
        total = self.lengths
        pos = np.arange(seq)[None, :]
        table = self.alloc.table
        entry = table[np.arange(s.batch)[:, None], pos // s.page_size]
        live = (pos < total[:, None]) & (entry >= 0)
        slots = np.where(live, entry * s.page_size + pos % s.page_size, -1).astype(np.int32)
        n = s.batch * s.kv_heads * seq * s.head_dim
        params = {"count": s.batch * s.kv_heads * seq, "seq": seq}
        shape = {"batch": s.batch, "seq": seq, "pages": self.pages}
        if s.addressing == "page_table":
            seqlens = (total - 1).astype(np.int32)
            check_pages(self.pages, s.page_size, page_table=table)
            bound = {
                "seqlens_k": self._input("seqlens_k", seqlens),
                "page_table": self._input("page_table", table),
            }
            params["maxPages"] = shape["maxPages"] = s.max_pages
            inputs = {"page_table": table}
        else:
            seqlens = None
            check_pages(self.pages, s.page_size, read_slots=slots)
            bound = {"slot_mapping": self._input("slot_mapping", slots)}
            inputs = {"slot_mapping": slots}
        out = []
        for i, layer in enumerate(self.layers):
            pools = self._pool(layer, layer.live)
            outs = [self._input(name, poison(n, np.float32).view(np.int32)) for name in ("key", "value")]  # fmt: skip
            b = bound | {"key_pages": pools[0], "value_pages": pools[1]}
            b |= {"key": outs[0], "value": outs[1]}
            self.host.dispatch(self.rows.read, b, shape, params, seqlens, inputs)
            got = [np.frombuffer(self.host.read(o.buffer), np.float32)[:n] for o in outs]
            rows = []
            for j, pool in enumerate(pools):
                stored = self._stored(pool)
                rows_ = self.rows.decode(stored.reshape(-1, self.rows.unit), s.head_dim)
                rows_ = rows_.reshape(-1, s.kv_heads, s.head_dim)[np.maximum(slots, 0)]
                want = np.where(live[:, :, None, None], rows_, poison(1, np.float32)[0])
                if s.addressing == "page_table":
                    want = want.transpose(0, 2, 1, 3)  # BNSH
                want = np.ascontiguousarray(want, np.float32).reshape(-1)
                g = got[j]
                same = g.view(np.uint32) == want.view(np.uint32)
                near = same
                if self.rows.asymmetric:
                    near = np.abs(g - want) <= 1e-6 * (1 + np.abs(want))
                if not (same | near).all():
                    at = int(np.flatnonzero(~(same | near))[0])
                    raise SessionMismatch(
                        f"read, layer {i}: {'key' if j == 0 else 'value'} element {at} is "
                        f"{g[at]!r}, the stored row gives {want[at]!r}"
                    )
                shaped = want.reshape(
                    (s.batch, s.kv_heads, seq, s.head_dim)
                    if s.addressing == "page_table"
                    else (s.batch, seq, s.kv_heads, s.head_dim)
                )
                if s.addressing != "page_table":
                    shaped = shaped.transpose(0, 2, 1, 3)
                shaped = np.where(live[:, None, :, None], shaped, np.float32(np.nan))
                rows.append(shaped)
            out.append(tuple(rows))
        self._step("read", 0, t)
        self._after()
        return out

    def _write(self, op: str, total: np.ndarray, key_seq: int, t: float) -> None:
        """New tokens so that sequence ``b`` holds ``total[b]``, the last ``min(key_seq,
        total[b])`` of them new: pages taken for new positions, shared ones copied first."""
        s = self.spec
        p = s.page_size
        seqlens = (total - 1).astype(np.int32)
        fresh = np.minimum(key_seq, total)
        pairs = self.alloc.writable(total - fresh, total, p)
        if pairs:
            self._copy(np.array(pairs, np.int32))
        if key_seq == 0:
            self.lengths = total
            self._step(op, 0, t)
            self._after()
            return
        drawn = time.perf_counter()
        tokens = self._tokens(key_seq)  # the model's output: not the host's overhead
        t += time.perf_counter() - drawn
        table = self.alloc.table
        held = np.flatnonzero(self.alloc.refs > 1)
        slots, _ = ref.table_places(table, seqlens, key_seq, p)
        new = self._write_tokens(tokens, key_seq)
        shape = {"batch": s.batch, "keySeq": key_seq, "pages": self.pages}
        params = {"count": s.batch * s.kv_heads * key_seq, "keySeq": key_seq}
        if s.addressing == "page_table":
            check_pages(
                self.pages, p, page_table=table, seqlens_k=seqlens, key_seq=key_seq, shared=held,
            )  # fmt: skip
            bound = {
                "seqlens_k": self._input("seqlens_k", seqlens),
                "page_table": self._input("page_table", table),
            }
            params["maxPages"] = shape["maxPages"] = s.max_pages
            inputs = {"page_table": table}
            lens = seqlens
        else:
            mapping = slots.astype(np.int32)
            check_pages(self.pages, p, slot_mapping=mapping, shared=held)
            bound = {"slot_mapping": self._input("slot_mapping", mapping)}
            inputs = {"slot_mapping": mapping}
            lens = None
        for layer, pair in zip(self.layers, new):
            pools = self._pool(layer, layer.live)
            b = bound | {"src_k": pair[0], "src_v": pair[1]}
            b |= {"key_pages": pools[0], "value_pages": pools[1]}
            self.host.dispatch(self.rows.append, b, shape, params, lens, inputs)
        self._step(op, key_seq, t)
        flat = slots.reshape(-1)
        live = flat >= 0
        _, positions = ref.table_places(table, seqlens, key_seq, p)
        seq = np.repeat(np.arange(s.batch), key_seq)[live]
        at = positions.reshape(-1)[live]
        self.held[seq, at] = True
        h, d = s.kv_heads, s.head_dim
        for layer, (k, v) in zip(self.layers, tokens):
            for model, rows, by_seq in ((layer.model_k, k, layer.seq_k), (layer.model_v, v, layer.seq_v)):  # fmt: skip
                enc = self.rows.encode(rows.reshape(-1, h, d))
                pool = model[layer.live].reshape(-1, h, self.rows.unit)
                pool[flat[live]] = enc[live]
                by_seq[seq, at] = enc[live]
        self.lengths = total
        self._after()

    def _copy(self, pairs: np.ndarray) -> None:
        """Copy-on-write: page ``dst`` of every pool a copy of page ``src``, each pair."""
        check_pages(self.pages, self.spec.page_size, page_pairs=pairs)
        bound_pairs = self._input("page_pairs", pairs)
        shape = {"pages": self.pages, "copies": len(pairs)}
        for layer in self.layers:
            pools = self._pool(layer, layer.live)
            bound = {"page_pairs": bound_pairs, "key_pages": pools[0], "value_pages": pools[1]}
            self.host.dispatch(
                self.rows.copy, bound, shape, {"count": len(pairs)}, inputs={"page_pairs": pairs}
            )
            for model in (layer.model_k, layer.model_v):
                pool = model[layer.live]
                pool[pairs[:, 1]] = pool[pairs[:, 0]]
        self.copies += len(pairs)

    def _attend_inputs(self, oracle: bool) -> tuple:
        # A sequence attends over the positions it holds, through its own page table (a fork
        # reads the pages it shares until it writes them); a page a window released is not
        # read, so the oracle's rows are the held ones, in order, the new token's last.
        s = self.spec
        exact = isinstance(self.host, InterpHost)
        entries = self.alloc.table
        check_pages(self.pages, s.page_size, page_table=entries)
        table = self._input("page_table", entries)
        held = [np.flatnonzero(self.held[b, : self.lengths[b]]) for b in range(s.batch)]
        rows = np.array([len(h) for h in held], np.int64)
        b = np.repeat(np.arange(s.batch), rows)
        t = np.concatenate(held)
        at = np.concatenate([np.arange(n) for n in rows])
        layers = []
        for layer in self.layers:
            pools = self._pool(layer, layer.live)
            sides: list[np.ndarray | None] = [None, None]
            for side, (pool, by_seq) in enumerate(zip(pools, (layer.seq_k, layer.seq_v))):
                if not oracle:
                    continue
                stored = by_seq[b, t]
                if not exact:  # the codes the check accepts (a dense one may move by a step)
                    got = self._stored(pool)[entries[b, t // s.page_size], t % s.page_size]
                    ok = not self.rows.judge(got, stored, exact, s.head_dim)
                    stored = got if ok else stored
                out = np.zeros((s.batch, int(rows.max()), s.kv_heads, s.head_dim), np.float32)
                decoded = self.rows.decode(stored.reshape(-1, self.rows.unit), s.head_dim)
                decoded = self.rows.attended(decoded)
                out[b, at] = decoded.reshape(len(b), s.kv_heads, s.head_dim)
                sides[side] = out.transpose(0, 2, 1, 3)
            # The contract's size for the binding (the room after the pool holds canaries).
            size = max(pools[0].size, self._room)
            bound = {"page_table": table}
            bound |= {n: Bound(r.buffer, r.offset, size) for n, r in zip(("key_pages", "value_pages"), pools)}  # fmt: skip
            layers.append(AttendLayer(bound, *sides))
        m = s.max_pages
        inputs = {"page_table": entries}
        return (
            self.lengths,
            rows,
            layers,
            {"pages": self.pages, "maxPages": m},
            {"maxPages": m},
            inputs,
        )

    # ---- checks ----------------------------------------------------------------------------

    def _stored(self, r: Bound) -> np.ndarray:
        raw = self.host.read(r.buffer)
        flat = np.frombuffer(raw[r.offset : r.offset + self.pool_bytes], self.rows.dtype)
        return self._pool_of(flat)

    def check(self) -> None:
        """Raise :class:`SessionMismatch` unless every page of both pools of every layer equals
        the oracle's (the free pages their old contents), every canary holds its bytes and the
        allocator's counts match the tables."""
        s = self.spec
        exact = isinstance(self.host, InterpHost)
        end = self.canary + self.pool_bytes
        for where, layer, side, which, body in self._read_back(end, "pool"):
            got = self._pool_of(np.frombuffer(body, self.rows.dtype))
            models = layer.model_k if side == "key" else layer.model_v
            problem = self.rows.judge(got, models[which], exact, s.head_dim)
            if problem:
                owned = "live" if which == layer.live else "other"
                raise SessionMismatch(f"{where} ({owned} pool): {problem}")
            if which == layer.live:
                self._check_sequences(where, side, got, layer)
        self.alloc.check()
        self.checks += 1

    def _check_sequences(self, where: str, side: str, pool: np.ndarray, layer: _PagedLayer) -> None:
        """Each position a sequence holds, reached through the host's table, is the row the
        sequence was given there (a table rewritten wrong reaches another page); a mismatch
        names ``where`` (the layer and side)."""
        s = self.spec
        by_seq = layer.seq_k if side == "key" else layer.seq_v
        b, t = np.nonzero(self.held)
        page = self.alloc.table[b, t // s.page_size]
        if (page < 0).any():
            j = int(np.flatnonzero(page < 0)[0])
            raise SessionMismatch(
                f"after {self._where()}: sequence {int(b[j])} holds position {int(t[j])}, "
                "but its page table has no page there"
            )
        got = pool[page, t % s.page_size]
        problem = self.rows.judge(got, by_seq[b, t], isinstance(self.host, InterpHost), s.head_dim)
        if problem:
            bad = np.flatnonzero(
                (got.reshape(len(b), -1).view(f"u{self.rows.dtype.itemsize}")
                 != by_seq[b, t].reshape(len(b), -1).view(f"u{self.rows.dtype.itemsize}")).any(axis=1)
            )  # fmt: skip
            j = int(bad[0]) if bad.size else 0
            raise SessionMismatch(
                f"{where}: sequence {int(b[j])} position "
                f"{int(t[j])} (page {int(page[j])}) is not the row it was given: {problem}"
            )
