"""Verification cases of ``attend`` and ``attend_merge`` (:mod:`kvdsl.kernels.attend`).

A case is a decode step of attention: ``batch`` sequences of random lengths (each at least its
``queries`` new tokens, 1 to ``max_queries``), random non-zero Q, K and V, a random scale,
sinks, window and soft-cap where the variant has them; a contiguous cache with spare capacity,
or pages shuffled over a pool whose rows no table names hold NaN (or NaN words), pages wholly
before every new token's window released (-1 in the table). A quantised cache holds K and V
encoded by the format's own reference encoder (:mod:`kvdsl.harness.attend_cache`), and the
reference attends over the values they decode to. Outputs start poisoned.

``attend`` with one chunk writes ``output``: the float64 reference
(:func:`kvdsl.reference.attention.attention`). With several chunks it writes ``partials``
(output untouched): per query row and chunk, the unnormalised output ``sum e^(x - m) v``
over the chunk's visible keys, then ``(m, l, 0, 0)``, computed here in float64 from the same
logits (:func:`partials`); a chunk that sees no key holds ``m`` = :data:`HIDDEN`, ``l`` 0 and
a zero output. ``attend_merge`` takes such float64 partials of a random problem, cut into 1 to
6 chunks (some empty), and writes the reference's output: so the two variants a host runs in
sequence are each verified on their own, and :func:`merged` (float64) checks that the
partials mean the reference.

Tolerances, against the reference and the GPU against the interpreter alike: ``exp`` and
``tanh`` are approximate on a GPU (WGSL: ``exp`` within ``3 + 2|x|`` ULP, a few ULP for the
logit differences here), and the f32 dot products over ``head_dim`` and sums over the keys
round; outputs are weighted means of values below 2, so
:data:`~kvdsl.reference.judge.ATTENTION_TOL` (relative to ``1 + |x|``) bounds both. An f16
output rounds to half precision: :data:`~kvdsl.reference.judge.ATTENTION_F16_TOL`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kvdsl.harness.attend_cache import KiviCache, encode, kivi_cache
from kvdsl.harness.cases import Case, case_generator
from kvdsl.kernels.attend import HIDDEN, AttendConfig, CacheLayout, RowLayout, plan
from kvdsl.kernels.attend.config import row_blocks
from kvdsl.kernels.config import Element
from kvdsl.kernels.paged import Pool
from kvdsl.reference.attention import attention, visible
from kvdsl.reference.judge import ATTENTION_F16_TOL, ATTENTION_TOL, poison, values
from kvdsl.reference.paged import pool_arrays
from kvdsl.reference.rotation import rotation


@dataclass
class Problem:
    """One attention problem in float64 terms: Q ``[B, Hq, S, D]``, K and V ``[B, Hkv, T, D]``
    (as the cache holds them), ``lengths`` (rows per sequence, new tokens last) and the
    options."""

    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    lengths: np.ndarray
    scale: float
    window: int | None = None
    softcap: float | None = None
    sinks: np.ndarray | None = None
    # Q is rotated over blocks of this many dimensions before it meets K (0: not rotated).
    rotation: int = 0

    @property
    def q_seen(self) -> np.ndarray:
        """Q as it meets the cache's K rows: rotated (:mod:`kvdsl.reference.rotation`) where
        the kernel rotates it."""
        if not self.rotation:
            return self.q
        return rotation(self.q.shape[-1], self.rotation).rotate(np.asarray(self.q, np.float64))

    def reference(self) -> np.ndarray:
        """The output ``[B, Hq, S, D]`` (float64)."""
        return attention(
            self.q_seen, self.k, self.v, self.lengths, scale=self.scale, window=self.window,
            softcap=self.softcap, sinks=self.sinks,
        )  # fmt: skip


def partials(p: Problem, chunk: int, chunks: int) -> np.ndarray:
    """The split-K partials ``[B, Hq, S, chunks, D + 4]`` (float64) of ``p`` over ``chunks``
    ranges of ``chunk`` keys: each row's ``sum_j e^(x_j - m) v_j`` over the range's visible
    keys, then ``m`` (their largest logit, :data:`HIDDEN` for none), ``l = sum_j e^(x_j - m)``
    and two zeros."""
    q, k, v = (np.asarray(a, np.float64) for a in (p.q_seen, p.k, p.v))
    b, hq, s, d = q.shape
    t, group = k.shape[2], hq // k.shape[1]
    kq, vq = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    x = np.einsum("bhsd,bhtd->bhst", q, kq) * p.scale
    if p.softcap is not None:
        x = p.softcap * np.tanh(x / p.softcap)
    seen = np.broadcast_to(visible(p.lengths, s, t, p.window)[:, None], x.shape)
    out = np.zeros((b, hq, s, chunks, d + 4))
    for c in range(chunks):
        keys = slice(c * chunk, min((c + 1) * chunk, t))
        xs, sees = x[..., keys], seen[..., keys]
        m = np.where(sees, xs, -np.inf).max(axis=-1, initial=-np.inf)
        some = np.isfinite(m)
        w = np.where(sees, np.exp(xs - np.where(some, m, 0.0)[..., None]), 0.0)
        out[..., c, :d] = np.einsum("bhst,bhtd->bhsd", w, vq[..., keys, :])
        out[..., c, d] = np.where(some, m, HIDDEN)
        out[..., c, d + 1] = w.sum(axis=-1)
    return out


def merged(parts: np.ndarray, sinks: np.ndarray | None = None) -> np.ndarray:
    """The output ``[B, Hq, S, D]`` the partials (:func:`partials`) and ``sinks`` mean, in
    float64: ``sum_c e^(m_c - M) o_c / (sum_c e^(m_c - M) l_c + e^(sink - M))``."""
    o, m, l = parts[..., :-4], parts[..., -4], parts[..., -3]
    m = np.where(m > HIDDEN, m, -np.inf)
    top = m.max(axis=-1)
    if sinks is not None:
        sink = np.asarray(sinks, np.float64)[None, :, None]
        top = np.maximum(top, sink)
    top = np.where(np.isfinite(top), top, 0.0)
    w = np.exp(m - top[..., None])
    total = (w * l).sum(axis=-1)
    if sinks is not None:
        total = total + np.exp(sink - top)
    out = np.einsum("bhsc,bhscd->bhsd", w, o)
    return np.divide(out, total[..., None], out=np.zeros_like(out), where=total[..., None] > 0)


@dataclass
class AttendCase(Case):
    """A case of ``attend`` or ``attend_merge``, with its problem and the reference output
    (``[B, Hq, S, D]``) a host gets after both dispatches."""

    problem: Any = None
    attention: np.ndarray = field(default_factory=lambda: np.zeros(0))


def _dtype(e: Element) -> Any:
    return np.float16 if e is Element.F16 else np.float32


def _rows(x: np.ndarray, layout: RowLayout) -> np.ndarray:
    """``[B, H, S, D]`` as ``layout``'s rows, flat."""
    return (x if layout is RowLayout.BNSH else x.transpose(0, 2, 1, 3)).reshape(-1)


def _problem(cfg: AttendConfig, rng: np.random.Generator, i: int, batch: int, queries: int,
             longest: int, window: bool, softcap: bool) -> Problem:  # fmt: skip
    """Random lengths (each ``queries`` .. ``longest``, one of them ``longest``) and values."""
    lengths = rng.integers(queries, longest + 1, batch)
    lengths[i % batch] = longest
    ct = _dtype(cfg.cache_type)
    k = values(rng, (batch, cfg.kv_heads, longest, cfg.head_dim), ct)
    v = values(rng, (batch, cfg.kv_heads, longest, cfg.head_dim), ct)
    q = values(rng, (batch, cfg.q_heads, queries, cfg.head_dim), _dtype(cfg.q_type))
    scale = float(np.float32(rng.uniform(0.5, 1.5) / np.sqrt(cfg.head_dim)))
    return Problem(
        q, k, v, lengths, scale,
        window=int(rng.integers(1, longest + 1)) if window else None,
        softcap=float(np.float32(rng.uniform(2.0, 8.0))) if softcap else None,
        sinks=values(rng, cfg.q_heads, np.float32) * 2 if cfg.sinks else None,
    )  # fmt: skip


def _paged(cfg: AttendConfig, rng: np.random.Generator, p: Problem, queries: int,
           cache: dict[str, np.ndarray]):  # fmt: skip
    """The cache's rows (``cache``: ``key``'s and ``value``'s ``[B, Hkv, T, W]`` as stored, and
    a format's side ``scales``) over pages shuffled in a pool (spare pages and unused rows NaN
    or poison words; pages wholly before every new token's window released): pool bindings,
    the page table, the pool's pages and ``maxPages``."""
    size, b = cfg.page_size, p.k.shape[0]
    owned = [-(-int(n) // size) for n in p.lengths]
    max_pages = max(owned) + int(rng.integers(0, 2))
    ids = rng.permutation(sum(owned) + int(rng.integers(1, 3)))
    table = np.full((b, max_pages), -1, np.int32)
    pools = {
        name: _unwritten((len(ids), size, x.shape[1], x.shape[-1]), x.dtype)
        for name, x in cache.items()
    }
    at = 0
    for s, n in enumerate(int(n) for n in p.lengths):
        for page in range(owned[s]):
            first = page * size
            if p.window is not None and first + size <= n - queries - p.window + 1:
                continue  # released: every row of it is before every new token's window
            pid, at = int(ids[at]), at + 1
            table[s, page] = pid
            rows = min(size, n - first)
            for name, x in cache.items():
                pools[name][pid, :rows] = x[s, :, first : first + rows].transpose(1, 0, 2)
    layout = cfg.page_layout.value
    arrays = pool_arrays(pools["key"], pools["value"], layout, cfg.pool.value)
    names = ("kv_pages",) if cfg.pool is Pool.COMBINED else ("key_pages", "value_pages")
    out = dict(zip(names, arrays)) | {"page_table": table.reshape(-1)}
    if "scales" in pools:
        out["scale_pages"] = pool_arrays(pools["scales"], pools["scales"], layout, "separate")[0]
    return out, len(ids), max_pages


def _unwritten(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Rows no writer wrote: NaN values, or words whose bits are a NaN's."""
    return np.full(shape, np.nan, dtype) if np.dtype(dtype).kind == "f" else poison(shape, dtype)


def _stored(cfg: AttendConfig, rng: np.random.Generator, p: Problem, k: np.ndarray,
            v: np.ndarray, buffers: dict, params: dict) -> dict[str, np.ndarray]:  # fmt: skip
    """The cache's rows ``[B, Hkv, T, W]`` of K and V ``[B, Hkv, T, D]`` (``T`` at least the
    problem's rows) as stored: the values of an f32 or f16 cache, or a format's rows
    (:func:`kvdsl.harness.attend_cache.encode`) and side ``scales``, the problem's K and V then
    the values they decode to, the template's ``kv_scale`` and ``perChannel`` added to the
    case."""
    if cfg.format is None:
        return {"key": k, "value": v}
    enc = encode(cfg, rng, k, v)
    t = p.k.shape[2]
    p.k, p.v = enc.k[:, :, :t], enc.v[:, :, :t]
    buffers |= enc.buffers
    params |= enc.params
    cache = {"key": enc.key, "value": enc.value}
    return cache | ({} if enc.side is None else {"scales": enc.side})


def _kivi(cfg: AttendConfig, rng: np.random.Generator, p: Problem, queries: int) -> KiviCache:
    """The problem's K and V in KIVI's cache (:func:`kvdsl.harness.attend_cache.kivi_cache`),
    the problem's K and V then the values they decode to; in pages, those wholly before every
    new token's window released."""

    def released(s: int, first: int) -> bool:
        n = int(p.lengths[s])
        return p.window is not None and first + cfg.page_size <= n - queries - p.window + 1

    kv = kivi_cache(cfg, rng, p.k, p.v, p.lengths, released)
    p.k, p.v = kv.k, kv.v
    return kv


def _tolerance(cfg: AttendConfig) -> float:
    return ATTENTION_F16_TOL if cfg.o_type is Element.F16 else ATTENTION_TOL


@case_generator("attend")
def attend_case(cfg: AttendConfig, rng: np.random.Generator, i: int) -> AttendCase:
    """One chunk (case 0, 3, ...), several of a few keys with an empty last one (1, 4, ...), or
    the ones :func:`kvdsl.kernels.attend.plan` picks for a small target (2, 5, ...)."""
    batch = 1 + i % 3
    queries = [1, cfg.max_queries, int(rng.integers(1, cfg.max_queries + 1))][i % 3]
    longest = [int(rng.integers(queries, 60)), int(rng.integers(60, 200)), 300][i % 3]
    longest = max(longest, queries)
    p = _problem(cfg, rng, i, batch, queries, longest, cfg.sliding_window, cfg.softcap)
    p.rotation = cfg.rotation
    blocks = -(-(cfg.group * queries) // cfg.rows)
    if i % 3 == 0:
        chunk = min(longest + int(rng.integers(0, 9)), cfg.max_chunk)
    elif i % 3 == 1:
        chunk = int(rng.integers(8, 48))
    else:
        chunk = plan(cfg, batch=batch, queries=queries, longest=longest, target=16)["chunk"]
    chunks = -(-longest // chunk) + (i % 3 == 1)
    shape: dict[str, int] = {"batch": batch, "queries": queries, "chunk": chunk}
    shape["chunks"] = chunks
    params: dict[str, int | float] = {"batch": batch}
    buffers: dict[str, np.ndarray] = {"seqlens_k": (p.lengths - 1).astype(np.int32)}
    buffers["query"] = _rows(p.q, cfg.q_layout)
    if cfg.kivi_bits is not None:
        kv = _kivi(cfg, rng, p, queries)
        buffers |= kv.buffers
        shape |= kv.shape
        params |= kv.params
    elif cfg.cache is CacheLayout.BNSH:
        seq = longest + int(rng.integers(0, 6))
        # Rows past a sequence's length are another step's: random, never read.
        spare = values(rng, p.k.shape[:2] + (seq - longest, cfg.head_dim), p.k.dtype)
        k = np.concatenate([p.k, spare], axis=2) if seq > longest else p.k
        v = np.concatenate([p.v, spare[..., ::-1]], axis=2) if seq > longest else p.v
        cache = _stored(cfg, rng, p, k, v, buffers, params)
        buffers |= {"key": cache["key"].reshape(-1), "value": cache["value"].reshape(-1)}
        if "scales" in cache:
            buffers["scales"] = cache["scales"].reshape(-1)
        shape["seq"] = params["seq"] = seq
        if "perChannel" in params:  # the template's cache: its scales per channel or one
            shape["perChannel"] = params["perChannel"]
    else:
        cache = _stored(cfg, rng, p, p.k, p.v, buffers, params)
        pools, pages, max_pages = _paged(cfg, rng, p, queries, cache)
        buffers |= pools
        shape["pages"] = pages
        params["maxPages"] = max_pages
    params |= {"queries": queries, "chunk": chunk, "chunks": chunks, "rowBlocks": blocks}
    params["scale"] = p.scale
    if p.window is not None:
        shape["window"] = params["window"] = p.window
    if p.softcap is not None:
        params["softcap"] = p.softcap
    if p.sinks is not None:
        buffers["sinks"] = p.sinks
    if row_blocks(cfg) is None:  # the contract's rowBlocks is then a shape variable
        shape["rowBlocks"] = blocks
    if cfg.cache is CacheLayout.PAGED and cfg.kivi_bits is None:
        shape["maxPages"] = max_pages
    want = p.reference()
    rows = batch * cfg.q_heads * queries
    ot = _dtype(cfg.o_type)
    buffers["output"] = poison(rows * cfg.head_dim, ot)
    buffers["partials"] = poison(rows * chunks * (cfg.head_dim + 4), np.float32)
    out = _rows(want, cfg.o_layout).astype(ot)
    if chunks == 1:
        expected = {"output": out, "partials": buffers["partials"]}
        written = {"partials": np.zeros(buffers["partials"].size, bool)}
    else:
        parts = partials(p, chunk, chunks).astype(np.float32).reshape(-1)
        expected = {"output": buffers["output"], "partials": parts}
        written = {"output": np.zeros(out.size, bool)}
    tol = {"output": _tolerance(cfg), "partials": ATTENTION_TOL}
    return AttendCase(shape, buffers, params, expected, written, tol, problem=p, attention=want)


@case_generator("attend_merge")
def attend_merge_case(cfg: AttendConfig, rng: np.random.Generator, i: int) -> AttendCase:
    """Float64 partials of a random problem over 1 to 6 chunks (the last ones empty on odd
    cases) as ``attend`` writes them; the output the reference gives."""
    batch = 1 + i % 3
    queries = 1 + i % 3
    longest = int(rng.integers(queries + 4, 120))
    p = _problem(cfg, rng, i, batch, queries, longest, window=False, softcap=False)
    chunks = [1, int(rng.integers(2, 5)), 6][i % 3]
    chunk = -(-longest // chunks)
    if i % 2:
        chunk = max(1, -(-longest // max(chunks - 1, 1)))  # a last chunk past every sequence
    parts = partials(p, chunk, chunks).astype(np.float32)
    want = p.reference()
    ot = _dtype(cfg.o_type)
    rows = batch * cfg.q_heads * queries
    buffers = {"partials": parts.reshape(-1)}
    if p.sinks is not None:
        buffers["sinks"] = p.sinks
    buffers["output"] = poison(rows * cfg.head_dim, ot)
    shape = {"batch": batch, "queries": queries, "chunks": chunks}
    out = _rows(want, cfg.o_layout).astype(ot)
    tol = {"output": _tolerance(cfg)}
    return AttendCase(dict(shape), buffers, dict(shape), {"output": out}, {}, tol, problem=p,
                      attention=want)  # fmt: skip
