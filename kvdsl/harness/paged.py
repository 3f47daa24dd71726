"""Verification cases for the paged modes (:mod:`kvdsl.kernels.paged`,
:mod:`kvdsl.kernels.paged_pages`).

Page tables are what a serving engine's allocator leaves behind: page ids shuffled over a pool
larger than the sequences need, sequences of ragged lengths (right-padded first prompts, empty
ones), forked sequences sharing their prefix pages, released pages (``-1`` entries) and
skipped tokens (``-1`` slots). Pools and outputs start poisoned: the elements a pass does not
own must keep the poison (pools a pass only partly writes) or their contents (whole pools
rewritten in place).
"""

from __future__ import annotations

import numpy as np

from kvdsl.harness.cases import Case, case_generator, dtype, flat
from kvdsl.harness.dense import DenseCase
from kvdsl.harness.modes import adversarial_seqlens
from kvdsl.kernels.paged import POOLS, COMBINED_POOL, SCALE_POOL, Addressing, PagedAppendConfig
from kvdsl.kernels.paged import PagedConfig, PagedReadConfig, Pool
from kvdsl.kernels.paged_pages import (
    COMPACT_COMBINED,
    COMPACT_POOLS,
    COMPACT_SCALES,
    PagedCompactConfig,
    PagedCopyConfig,
    PagedWindowConfig,
)
from kvdsl.reference import formats as fm
from kvdsl.reference import paged as ref
from kvdsl.reference.judge import poison, values
from kvdsl.reference.modes import KNorm, Rotary

def pool_buffers(
    cfg: PagedConfig, k: np.ndarray, v: np.ndarray, scales: np.ndarray | None = None,
    names: tuple[str, str] = POOLS, combined: str = COMBINED_POOL, side: str = SCALE_POOL,
) -> dict[str, np.ndarray]:  # fmt: skip
    """K and V pools ``[pages, P, H, row]`` (a row's values, or a dense row's words) and side
    ``scales`` ``[pages, P, H, 2S]`` as ``cfg``'s pool bindings, by name."""
    lay = cfg.page_layout.value
    arrays = ref.pool_arrays(k, v, lay, cfg.pool.value)
    out = {combined: arrays[0]} if cfg.pool is Pool.COMBINED else dict(zip(names, arrays))
    if scales is not None and cfg.scale_geometry is not None:
        out[side] = ref.pool_arrays(scales, scales, lay, "separate")[0]
    return out


def _dense_case(cfg: PagedConfig, case: Case) -> Case:
    """``case`` as a :class:`~kvdsl.harness.dense.DenseCase` when ``cfg``'s pools hold a
    dense format: their rows compared bit for bit, codes one step apart against the GPU (and,
    with K RMSNorm, K's against the reference too); side scales within an ulp or two."""
    fmt = cfg.dense
    if fmt is None:
        return case
    pools = [n for n in case.expected if n != SCALE_POOL]
    out = DenseCase(
        case.shape, case.buffers, case.params, case.expected, case.written,
        codes={n: fmt.bits for n in pools},
        layout={n: (fmt, cfg.head_dim, cfg.inline) for n in pools},
    )  # fmt: skip
    knorm = isinstance(cfg, PagedAppendConfig) and cfg.k_norm
    if knorm:
        out.quantized = {n: fmt.bits for n in pools if n == "key_pages"}
    if SCALE_POOL in case.expected:
        out.tolerance = {SCALE_POOL: 1e-5 if knorm else 1e-6}
    return out


def allocate(
    rng: np.random.Generator, needs: list[int], spare: int, fork: bool
) -> tuple[np.ndarray, int]:
    """Page tables ``[B, maxPages]`` for sequences needing ``needs`` pages each, their page ids
    shuffled over a pool with ``spare`` pages no table names (entries past a sequence's pages:
    ``-1``); with ``fork`` the two longest sequences share their leading pages (all but the
    last of the shorter one's), as a fork of one prompt does. Returns the tables and the
    pool's pages."""
    batch, most = len(needs), max(max(needs), 1)
    order = sorted(range(batch), key=lambda b: -needs[b])
    parent, child = (order[0], order[1]) if fork and batch > 1 else (0, 0)
    shared = max(needs[child] - 1, 0) if parent != child else 0
    pages = sum(needs) - shared + spare
    ids = iter(rng.permutation(pages))
    table = np.full((batch, most + 1), -1, np.int32)
    for b in order:  # the parent first: the child takes its leading pages
        for i in range(needs[b]):
            table[b, i] = table[parent, i] if b == child and i < shared else next(ids)
    return table, pages


def _rotary(rng: np.random.Generator, positions: int, half: int) -> Rotary:
    """Random tables of ``half`` rotated pairs per position."""
    theta = rng.uniform(0, 2 * np.pi, (positions, half))
    return Rotary(np.cos(theta).astype(np.float32), np.sin(theta).astype(np.float32), half)


def _tolerance(cfg: PagedAppendConfig) -> float:
    """Rotated or normed K may differ in the last ulps (fma contraction, approximate
    inverseSqrt); an f16 pool rounds those the same way but for one ulp."""
    if not (cfg.rotary or cfg.k_norm) or cfg.dense is not None:
        return 0.0
    return 2e-3 if cfg.format.value == "f16" else 2e-5


def stored_rows(
    cfg: PagedConfig, k: np.ndarray, v: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """f32 rows ``[..., D]`` of K and V as the pools store them: values of the format, or a
    dense format's words and side scales (K's stats then V's; None inline)."""
    fmt = cfg.dense
    if fmt is None:
        ct = dtype(cfg.format.value)
        return k.astype(ct), v.astype(ct), None
    (wk, sk), (wv, sv) = (fm.quantize_rows(fmt, x, cfg.inline) for x in (k, v))
    return wk, wv, None if cfg.inline else np.concatenate([sk, sv], axis=-1)


def append_table(
    rng: np.random.Generator, seqlens: np.ndarray, key_seq: int, p: int, i: int
) -> tuple[np.ndarray, int, np.ndarray]:
    """A page table for an append of ``key_seq`` tokens after ``seqlens``: the table, the pages
    it names and each sequence's total tokens. Forks share their leading pages, but new tokens
    must not land in a shared page (a host copies it first, paged_copy), so a page a sequence
    appends to is its own; on even ``i`` a released page (-1) sits in the last sequence's append
    window, so its tokens are skipped (while the first sequence's land)."""
    total = np.maximum(seqlens, -1) + 1
    table, pages = allocate(rng, [-(-int(n) // p) for n in total], 2, fork=True)
    for b in range(len(seqlens)):
        for j in range(max(int(total[b]) - key_seq, 0) // p, table.shape[1]):
            if table[b, j] >= 0 and (table == table[b, j]).sum() > 1:
                table[b, j] = pages
                pages += 1
    last = len(seqlens) - 1
    if total[last] > 0 and total[0] > 0 and i % 2 == 0:
        table[last, (int(total[last]) - 1) // p] = -1
    return table, pages, total


def scattered_slots(
    rng: np.random.Generator, batch: int, key_seq: int, p: int
) -> tuple[np.ndarray, int]:
    """Distinct random slots ``[batch, key_seq]`` in a pool of one page more than the tokens
    need, about a fifth of them -1 (skipped; one at least, and one token lands); and the pages."""
    tokens = batch * key_seq
    pages = -(-tokens // p) + 1
    slots = rng.permutation(pages * p)[:tokens].astype(np.int64)
    skip = rng.random(tokens) < 0.2
    skip[-1] = tokens > 1 and not skip[:-1].any()
    slots[skip] = -1
    return slots.reshape(batch, key_seq), pages


def appended_pools(
    cfg: PagedConfig, k: np.ndarray, v: np.ndarray, slots: np.ndarray, pages: int
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The pools (and scale pages) after K and V rows ``[B, S, H, D]`` (f32) are stored in
    ``cfg``'s format at ``slots`` (-1 skips) of ``pages`` pages: the expected bindings, and
    the masks of what the append writes."""
    h, p = cfg.kv_heads, cfg.page_size
    sk, sv, scales = stored_rows(cfg, k, v)
    flat = slots.reshape(-1)
    w = ref.append(pages, p, sk.reshape(-1, h, sk.shape[-1]), sv.reshape(-1, h, sv.shape[-1]), flat)
    ws = None
    if scales is not None:
        ws = ref.append(pages, p, *(scales.reshape(-1, h, scales.shape[-1]),) * 2, flat)
    expected = pool_buffers(cfg, w.key, w.value, None if ws is None else ws.key)
    written = pool_buffers(cfg, w.mask, w.mask, None if ws is None else ws.mask)
    return expected, written


@case_generator("paged_append")
def paged_append_case(cfg: PagedAppendConfig, rng: np.random.Generator, i: int) -> Case:
    batch, key_seq = 2 + i % 2, [1, 7, 21][i % 3]
    h, d, p = cfg.kv_heads, cfg.head_dim, cfg.page_size
    it = dtype(cfg.input_type.value)
    new_k = values(rng, (batch, key_seq, h * d), it)
    new_v = values(rng, (batch, key_seq, h * d), it)
    bufs: dict[str, np.ndarray] = {"src_k": new_k, "src_v": new_v}
    shape: dict[str, int] = {"batch": batch, "keySeq": key_seq}
    if cfg.addressing is Addressing.PAGE_TABLE:
        cap = 3 * p + 3  # the longest sequence: three pages and a few tokens
        seqlens = adversarial_seqlens(rng, batch, key_seq, cap, i)
        seqlens = np.minimum(seqlens, cap - 1).astype(np.int32)
        table, pages, total = append_table(rng, seqlens, key_seq, p, i)
        slots, pos = ref.table_places(table, seqlens, key_seq, p)
        bufs |= {"seqlens_k": seqlens, "page_table": table}
        shape["pages"], shape["maxPages"] = pages, table.shape[1]
        params = {"maxPages": table.shape[1]}
        positions = int(total.max(initial=0))
    else:
        slots, pages = scattered_slots(rng, batch, key_seq, p)
        pos = rng.integers(0, 3 * p, (batch, key_seq))
        bufs["slot_mapping"] = slots.astype(np.int32)
        if cfg.rotary:
            bufs["token_positions"] = pos.astype(np.int32)
        shape["pages"] = pages
        params = {}
        positions = int(pos.max()) + 1
    rot = norm = None
    if cfg.k_norm:
        norm = KNorm(rng.uniform(0.5, 1.5, d).astype(np.float32), cfg.eps)
        bufs["k_norm_weight"] = norm.weight
    if cfg.rotary:
        rot = _rotary(rng, max(positions, 1), cfg.half)
        bufs |= {"cos_cache": rot.cos, "sin_cache": rot.sin}
        shape["positions"] = max(positions, 1)
    k = new_k.astype(np.float32).reshape(batch, key_seq, h, d)
    k = ref.prepare_k(k, pos[:, :, None], norm, rot, cfg.rotation)
    v = new_v.astype(np.float32).reshape(batch, key_seq, h, d)
    if cfg.dense is not None:  # K and V in the basis the format stores them in
        k, v = fm.stored_basis(cfg.dense, k), fm.stored_basis(cfg.dense, v)
    expected, written = appended_pools(cfg, k, v, slots, pages)
    bufs |= {name: poison(a.size, a.dtype) for name, a in expected.items()}
    shape = {k_: shape[k_] for k_ in ("batch", "keySeq", "pages", "maxPages", "positions")
             if k_ in shape}  # fmt: skip
    tol = _tolerance(cfg)
    case = Case(
        shape,
        flat(bufs),
        {"count": batch * h * key_seq, "keySeq": key_seq} | params,
        expected,
        written,
        {name: tol for name in expected} if tol else {},
    )
    return _dense_case(cfg, case)


def _random_pools(
    rng: np.random.Generator, cfg: PagedConfig, pages: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Pools of ``pages`` pages of random rows (mixed magnitudes), as stored: values, or
    words and side scales."""
    shape = (pages, cfg.page_size, cfg.kv_heads, cfg.head_dim)
    scale = 10.0 ** rng.integers(-2, 3, (*shape[:-1], 1))
    k, v = (values(rng, shape, np.float32) * scale for _ in range(2))
    return stored_rows(cfg, k.astype(np.float32), v.astype(np.float32))


def _rows(cfg: PagedConfig, k: np.ndarray, v: np.ndarray, side: np.ndarray | None) -> tuple:
    """Stored rows ``[..., row]`` back as f32 (or f16) rows ``[..., D]``."""
    fmt = cfg.dense
    if fmt is None:
        return k, v
    n = fmt.stats
    sk = None if side is None else side[..., :n]
    sv = None if side is None else side[..., n:]
    d, inline = cfg.head_dim, cfg.inline
    return fm.dequantize_rows(fmt, k, sk, d, inline), fm.dequantize_rows(fmt, v, sv, d, inline)


@case_generator("paged_read")
def paged_read_case(cfg: PagedReadConfig, rng: np.random.Generator, i: int) -> Case:
    batch = 1 + i % 3
    h, d, p = cfg.kv_heads, cfg.head_dim, cfg.page_size
    out = dtype(cfg.output_type.value)
    if cfg.addressing is Addressing.PAGE_TABLE:
        cap = 2 * p + 5
        seqlens = rng.integers(-1, cap, batch).astype(np.int32)  # ragged, empty ones too
        seqlens[0] = cap - 1
        total = seqlens.astype(np.int64) + 1
        table, pages = allocate(rng, [-(-int(n) // p) for n in total], 3, fork=True)
        if i % 2 == 0:
            table[0, 0] = -1  # a page released by a sliding window
        seq = int(table.shape[1]) * p - [0, 3, p][i % 3]
        t = np.arange(seq)[None, :]
        index = np.minimum(t // p, table.shape[1] - 1)
        entry = table[np.arange(batch)[:, None], index]
        live = (t < total[:, None]) & (entry >= 0)
        slots = np.where(live, entry * p + t % p, -1)
        bufs = {"seqlens_k": seqlens, "page_table": table}
        shape = {"batch": batch, "seq": seq, "pages": pages, "maxPages": table.shape[1]}
        params = {"maxPages": table.shape[1]}
        k, v, side = _random_pools(rng, cfg, pages)
        rows_k, rows_v, mask = ref.gather(*_rows(cfg, k, v, side), slots)  # [B, seq, H, D]
        order = (0, 2, 1, 3)  # BNSH out
        rows_k, rows_v = rows_k.transpose(order), rows_v.transpose(order)
        mask = np.broadcast_to(mask[:, None, :, None], rows_k.shape)
    else:
        seq = [1, 9, 40][i % 3]
        pages = -(-batch * seq // p) + 1
        slots = rng.integers(0, pages * p, (batch, seq))  # forks may read one slot twice
        skip = rng.random(batch * seq) < 0.2
        skip[-1] = batch * seq > 1 and not skip[:-1].any()  # one at least, and one read
        slots[skip.reshape(batch, seq)] = -1
        bufs = {"slot_mapping": slots.astype(np.int32)}
        shape = {"batch": batch, "seq": seq, "pages": pages}
        params = {}
        k, v, side = _random_pools(rng, cfg, pages)
        rows_k, rows_v, mask = ref.gather(*_rows(cfg, k, v, side), slots)  # [B, seq, H, D]
        mask = np.broadcast_to(mask[:, :, None, None], rows_k.shape)
    bufs |= pool_buffers(cfg, k, v, side)
    size = batch * seq * h * d
    bufs |= {"key": poison(size, out), "value": poison(size, out)}
    expected = {"key": rows_k.astype(out).reshape(-1), "value": rows_v.astype(out).reshape(-1)}
    written = {"key": mask.reshape(-1), "value": mask.reshape(-1)}
    case = Case(
        shape,
        flat(bufs),
        {"count": batch * h * seq, "seq": seq} | params,
        expected,
        written,
    )
    if cfg.dense is not None and cfg.dense.asymmetric:
        # q * scale + zero: maybe one fma, which can move an f16 row's rounding by one ulp
        t = 2.0**-10 if np.dtype(out) == np.float16 else 1e-6
        case.tolerance = {"key": t, "value": t}
    return case


@case_generator("paged_copy")
def paged_copy_case(cfg: PagedCopyConfig, rng: np.random.Generator, i: int) -> Case:
    copies = [1, 3, 6][i % 3]
    pages = 2 * copies + 3
    order = rng.permutation(pages)
    pairs = np.stack([order[:copies], order[copies : 2 * copies]], axis=1).astype(np.int32)
    if copies > 1:
        pairs[-1] = [-1, order[-1]]  # a pair the host left empty: skipped
    k, v, side = _random_pools(rng, cfg, pages)
    live = pairs[(pairs >= 0).all(axis=1)]
    w = ref.copy_pages(k, v, live)
    scales = None if side is None else ref.copy_pages(side, side, live).key
    return Case(
        {"pages": pages, "copies": copies},
        {"page_pairs": pairs.reshape(-1)} | pool_buffers(cfg, k, v, side),
        {"count": copies},
        pool_buffers(cfg, w.key, w.value, scales),
    )


@case_generator("paged_compact")
def paged_compact_case(cfg: PagedCompactConfig, rng: np.random.Generator, i: int) -> Case:
    n = [1, 4, 9][i % 3]
    pages = n + 2 + i
    live = rng.permutation(pages)[:n].astype(np.int32)
    if n > 1:
        live[1] = -1  # a hole: page 1 of the new pools stays as it was
    k, v, side = _random_pools(rng, cfg, pages)
    at = np.maximum(live, 0)
    ck, cv = ref.compact(k, v, at)
    cs = None if side is None else side[at]
    alive = (live >= 0)[:, None, None, None]
    mask, smask = np.broadcast_to(alive, ck.shape), None
    if cs is not None:
        smask = np.broadcast_to(alive, cs.shape)
    names = (COMPACT_POOLS, COMPACT_COMBINED, COMPACT_SCALES)
    expected = pool_buffers(cfg, ck, cv, cs, *names)
    written = pool_buffers(cfg, mask, mask, smask, *names)
    bufs = {"live_pages": live} | pool_buffers(cfg, k, v, side)
    bufs |= {name: poison(a.size, a.dtype) for name, a in expected.items()}
    return Case({"pages": pages, "live": n}, bufs, {"count": n}, expected, written)


@case_generator("paged_window")
def paged_window_case(cfg: PagedWindowConfig, rng: np.random.Generator, i: int) -> Case:
    batch, p = 1 + i % 3, cfg.page_size
    seqlens = rng.integers(-1, 6 * p, batch).astype(np.int32)
    total = np.maximum(seqlens.astype(np.int64), -1) + 1
    table, _ = allocate(rng, [-(-int(n) // p) for n in total], 1, fork=True)
    table[0, 0] = -1 if i % 2 else table[0, 0]  # released already: freed stays -1
    window = int([p, 2 * p + 5, 3 * p - 1][i % 3])
    new_table, freed = ref.window(table, seqlens, window, p)
    return Case(
        {"batch": batch, "maxPages": table.shape[1], "window": window},
        {
            "seqlens_k": seqlens,
            "page_table": table.reshape(-1),
            "freed_pages": poison(table.size, np.int32),
        },
        {"count": table.size, "maxPages": table.shape[1], "window": window},
        {"page_table": new_table.reshape(-1), "freed_pages": freed.reshape(-1)},
    )
