"""Verification cases of ``kivi_append`` and ``kivi_flush`` (:mod:`kvdsl.kernels.kivi`),
contiguous and paged, against :mod:`kvdsl.reference.kivi`: random non-zero rows (f16-exact, an
offset and two large channels), the outputs poisoned; and :func:`session`, a decode session
over the KIVI cache, read by ``attend`` (:mod:`kvdsl.kernels.attend`), checked step by step
(``kvdsl kivi``). ``attend``'s own cases over KIVI's cache are
:mod:`kvdsl.harness.attend`'s."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

from kvdsl.harness.cases import Arrays, Case, case_generator
from kvdsl.kernels.attend import AttendConfig, CacheLayout, attend, attend_merge, plan
from kvdsl.kernels.kivi import (
    KiviAppendConfig,
    KiviCache,
    KiviFlushConfig,
    kivi_append,
    kivi_flush,
)
from kvdsl.reference import kivi
from kvdsl.reference.judge import ATTENTION_TOL, POISON_BITS, compare, compare_quantized

F16, F32 = np.float16, np.float32
POISON = POISON_BITS[4]


def kivi_rows(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Random non-zero f16-exact rows ``[..., D]`` with an offset and two large channels."""
    x = rng.uniform(0.25, 2.0, shape) * rng.choice([-1.0, 1.0], shape) + 0.3
    x[..., 3] *= 40.0
    x[..., -7] *= 12.0
    return x.astype(F16).astype(F32)


def _poison(n: int) -> np.ndarray:
    return np.full(n, POISON, np.uint32)


def _halves(x: np.ndarray) -> np.ndarray:
    """f32 rows ``[..., D]`` as u32 words of f16 pairs ``[..., D / 2]``, the lower channel low."""
    return np.ascontiguousarray(x.astype(F16)).view(np.uint32)


@case_generator("kivi_append")
def kivi_append_case(cfg: KiviAppendConfig, rng: np.random.Generator, i: int) -> Case:
    h, d, g = cfg.kv_heads, cfg.head_dim, cfg.group
    batch = [1, 2, 3][i % 3]
    past = [0, int(rng.integers(1, g)), int(rng.integers(g, 4 * g))][i % 3]
    key_seq = int(rng.integers(1, g - past % g + 1))
    src_k, src_v = (kivi_rows(rng, (batch, key_seq, h, d)) for _ in range(2))
    expected, written = {}, {}
    for name, src in (("residual_k", src_k), ("residual_v", src_v)):
        res = np.full((batch, h, g, d // 2), POISON, np.uint32)
        rows = (past + np.arange(key_seq)) % g
        res[:, :, rows] = _halves(src.transpose(0, 2, 1, 3))
        expected[name] = res.reshape(-1)
        mask = np.zeros(res.shape, bool)
        mask[:, :, rows] = True
        written[name] = mask.reshape(-1)
    return Case(
        {"batch": batch, "keySeq": key_seq, "pastSeq": past},
        {
            "src_k": src_k.reshape(-1),
            "src_v": src_v.reshape(-1),
            "residual_k": _poison(batch * h * g * d // 2),
            "residual_v": _poison(batch * h * g * d // 2),
        },
        {"batchSize": batch, "keySeq": key_seq, "pastSeq": past},
        expected,
        written,
    )


def page_table(rng: np.random.Generator, batch: int, max_pages: int, pages: int) -> np.ndarray:
    """Distinct pages of a pool of ``pages`` for ``batch`` rows of ``max_pages`` entries,
    shuffled (i32 ``[batch, max_pages]``)."""
    return rng.permutation(pages)[: batch * max_pages].reshape(batch, max_pages).astype(np.int32)


def code_words(d: int, bits: int, group: int, page_size: int, pages: int, heads: int) -> np.ndarray:
    """Which words of a pool ``[pages, heads, page_words]`` (flat) hold codes: K's codes and
    V's codes of each head's part; the rest are stats (:func:`kvdsl.reference.kivi.page_words`)."""
    codes = d * page_size // (32 // bits)
    stats = d * page_size // group
    part = np.zeros(2 * (codes + stats), bool)
    part[:codes] = part[codes + stats : 2 * codes + stats] = True
    return np.tile(part, pages * heads)


def pool_code_words(
    d: int, bits: int, group: int, page_size: int, heads: int, length: int
) -> np.ndarray:
    """:func:`code_words` of a flat pool of ``length`` words (its pages counted from it)."""
    pages = length // (heads * kivi.page_words(d, bits, group, page_size))
    return code_words(d, bits, group, page_size, pages, heads)


def pool_difference(
    got: np.ndarray,
    want: np.ndarray,
    codes: np.ndarray,
    bits: int,
    mask: np.ndarray | None = None,
) -> tuple[float, str]:
    """``(largest error, problem)`` of a pool of code and stat words (``codes`` marks the code
    words) judged as the contiguous cache's arrays are: the code words by
    :func:`~kvdsl.reference.judge.compare_quantized` (each code within one step, at most a few
    moved: a GPU's ``(x - min) * (1 / scale)`` may round the other way), the stat words bit for
    bit; with ``mask``, the words outside it must still hold the poison."""
    err, problem = compare(got, want, 0.0, mask)
    if not problem or err == float("inf"):
        return err, problem
    got, want = np.asarray(got).reshape(-1), np.asarray(want, np.uint32).reshape(-1)
    m = np.ones(got.shape, bool) if mask is None else np.asarray(mask).reshape(-1)
    stats = ~codes
    stat_err, stat_problem = compare(got[stats], want[stats], 0.0, m[stats])
    code_err, code_problem = compare_quantized(got[codes], want[codes], bits, m[codes])
    problems = [f"stat words: {stat_problem}"] if stat_problem else []
    problems += [f"code words: {code_problem}"] if code_problem else []
    return max(stat_err, code_err), "; ".join(problems)


@dataclass
class KiviPoolCase(Case):
    """A flush's case: its cache (the contiguous ``kivi_cache`` or the paged pool) mixes code
    words and f16 stat words (:meth:`code_mask`, from the pool's geometry ``pool``: head dim,
    bits, group, kv heads and page size, None for a contiguous cache's ``seq`` of the params).
    Where :attr:`codes` names the cache (against the GPU) it is judged by
    :func:`pool_difference`: the code words one step off in a few codes, the stat words bit for
    bit; elsewhere bit for bit. The geometry, not a mask, is kept, so that the judge takes a
    cache of any size (``kvdsl run``'s inputs)."""

    pool: tuple[int, int, int, int, int | None] = (0, 0, 0, 0, None)

    def code_mask(self, length: int) -> np.ndarray:
        """Which of a flat cache's ``length`` words hold codes (:func:`code_words`)."""
        d, bits, g, heads, size = self.pool
        size = int(self.params["seq"]) if size is None else size
        return pool_code_words(d, bits, g, size, heads, length)

    @property
    def code_words(self) -> np.ndarray:
        """The code words of this case's cache."""
        (cache,) = self.codes
        return self.code_mask(self.expected[cache].size)

    def judge_outputs(
        self, got: Arrays, want: Arrays, tolerance: dict[str, float], codes: dict[str, int]
    ) -> Iterator[tuple[str, float, str | None]]:
        plain = {k: v for k, v in want.items() if k not in codes}
        yield from super().judge_outputs(got, plain, tolerance, codes)
        for name, expected in want.items():
            if name in codes:
                mask = self.written.get(name)
                words = self.code_mask(np.asarray(got[name]).size)
                yield name, *pool_difference(got[name], expected, words, codes[name], mask)


def _paged_flush_case(cfg: KiviFlushConfig, rng: np.random.Generator, i: int) -> Case:
    """Each sequence's full residual into group ``flushGroup`` of the page its table names; in
    one case in three one sequence's entry for it is negative (nothing written there)."""
    g, size = cfg.group, cfg.page_size
    batch, max_pages = [1, 2, 2][i % 3], [1, 2, 3][i % 3]
    pages = batch * max_pages + [0, 1, 2][i % 3]
    flush = int(rng.integers(0, max_pages * size // g))
    table = page_table(rng, batch, max_pages, pages)
    if i % 3 == 1:
        table[-1, flush * g // size] = -1
    return _flushed(
        cfg,
        rng,
        table=table,
        pages=pages,
        page=size,
        flush=flush,
        shape={"batch": batch, "pages": pages, "flushGroup": flush, "maxPages": max_pages},
        params={"maxPages": max_pages, "flushGroup": flush},
    )


@case_generator("kivi_flush")
def kivi_flush_case(cfg: KiviFlushConfig, rng: np.random.Generator, i: int) -> Case:
    """Each slice's full residual into group ``flushGroup`` of its part of the contiguous
    cache (a page of ``seq`` tokens per sequence, :func:`kvdsl.reference.kivi.write_pages`),
    or of the page its table names (:func:`_paged_flush_case`)."""
    if cfg.paged:
        return _paged_flush_case(cfg, rng, i)
    batch = [1, 2, 1][i % 3]
    groups = [1, 3, 2][i % 3]
    seq = groups * cfg.group
    flush = int(rng.integers(0, groups))
    return _flushed(
        cfg,
        rng,
        table=np.arange(batch)[:, None],
        pages=batch,
        page=seq,
        flush=flush,
        shape={"batch": batch, "groups": groups, "flushGroup": flush},
        params={"seq": seq, "flushGroup": flush},
    )


def _flushed(
    cfg: KiviFlushConfig,
    rng: np.random.Generator,
    table: np.ndarray,
    pages: int,
    page: int,
    flush: int,
    shape: dict[str, int],
    params: dict[str, int],
) -> KiviPoolCase:
    """A flush's case: each sequence's random residual (sequence ``b``'s pages of ``page``
    tokens are ``table[b]``) flushed into group ``flush`` of its pages in a poisoned cache of
    ``pages`` pages ``[pages, kv heads, page words]``: the pool ``kivi_pages`` with the table
    as a buffer, or the contiguous ``kivi_cache`` (sequence ``b``'s page is ``b``)."""
    h, d, g = cfg.kv_heads, cfg.head_dim, cfg.group
    batch, name = len(table), "kivi_pages" if cfg.paged else "kivi_cache"
    k, v = (kivi_rows(rng, (batch * h, g, d)) for _ in range(2))
    words = np.full((pages, h, kivi.page_words(d, cfg.bits, g, page)), POISON, np.uint32)
    expected = words.copy()
    for b in range(batch):
        heads = [kivi.quantize(k[b * h + x], v[b * h + x], cfg.bits, g) for x in range(h)]
        kivi.write_pages(expected, table[b], heads, page, start=flush * g)
    bufs = {"residual_k": _halves(k).reshape(-1), "residual_v": _halves(v).reshape(-1)}
    if cfg.paged:
        bufs["page_table"] = table.reshape(-1)
    # The code words come from (x - min) * (1 / scale): a GPU's division may move one a step.
    return KiviPoolCase(
        shape,
        bufs | {name: words.reshape(-1)},
        {"count": batch * h} | params,
        {name: expected.reshape(-1)},
        {name: (expected != POISON).reshape(-1)},
        codes={name: cfg.bits},
        pool=(d, cfg.bits, g, h, page if cfg.paged else None),
    )


@dataclass
class SessionResult:
    """What a KIVI decode session found: its steps, tokens and flushes; the attention outputs
    off float64 attention over the oracle's cache (``mismatches`` elements past
    :func:`attention_bound`, ``worst`` the largest error as a fraction of its bound, ``inf``
    where an output is not finite) and the cache words off the reference's layout after each
    flush and at the end (``cache_mismatches``, by :func:`words_off`)."""

    steps: int
    tokens: int
    flushes: int
    mismatches: int
    worst: float
    cache_mismatches: int

    def line(self) -> str:
        ok = "ok" if self.mismatches == 0 and self.cache_mismatches == 0 else "MISMATCH"
        return (
            f"{self.steps} steps, {self.tokens} tokens a sequence, {self.flushes} flushes: "
            f"{self.mismatches} attention mismatches (worst {self.worst:.3f} of the bound), "
            f"{self.cache_mismatches} cache words off the reference: {ok}"
        )


def attention_bound(
    back_k: np.ndarray, back_v: np.ndarray, q: np.ndarray, scale: float, want: np.ndarray
) -> np.ndarray:
    """How far a GPU's f32 attention output may lie from float64 ``want`` over the decoded
    rows ``back_k``, ``back_v`` ``[T, D]``: a logit summed over ``D`` products in f32 is off by
    at most ``D u`` of its products' magnitudes (``u = 2^-24``), and a logit off by ``e`` moves
    the output's channel ``c`` by at most ``e`` times the largest ``|v_jc - want_c|``; plus
    :data:`kvdsl.reference.judge.ATTENTION_TOL` of ``1 + |want|``, the attend cases' allowance for a GPU's
    approximate ``exp`` and its f32 sums. Positive everywhere; a wrong page or a dropped group
    moves an output by a fair part of its values' spread (order 1), far past it."""
    u = 2.0**-24
    spread = np.abs(back_k) @ np.abs(q.astype(np.float64)) * scale
    logit_error = back_k.shape[1] * u * spread.max()
    return logit_error * np.abs(back_v - want).max(axis=0) + ATTENTION_TOL * (1 + np.abs(want))


def words_off(got: np.ndarray, want: np.ndarray, codes: np.ndarray, bits: int) -> np.ndarray:
    """Which cache words ``got`` are off the reference's ``want`` (flat u32, ``codes`` marking
    the code words): the words the reference wrote codes to may hold codes a step away (a
    GPU's rounding), a few of them (:func:`~kvdsl.reference.judge.compare_quantized`'s rule
    over them all; past it, every one that differs is off); every other word (stats, the
    poison of words no group reaches) bit for bit."""
    differ = got != want
    written = codes & (want != POISON)
    if differ[written].any() and not compare_quantized(got[written], want[written], bits)[1]:
        return differ & ~written
    return differ


def session(
    run,
    *,
    kv_heads: int = 2,
    q_heads: int = 4,
    head_dim: int = 64,
    group: int = 32,
    bits: int = 2,
    batch: int = 2,
    prompt: int = 37,
    steps: int = 1000,
    paged: bool = False,
    page_size: int = 64,
    seed: int = 21,
    kernels=None,
) -> SessionResult:
    """A decode session over a KIVI cache through ``run`` (``kvdsl.interp.run`` or the GPU's
    ``kvdsl.runtime.run``): a prompt of ``prompt`` tokens, then ``steps`` decode steps of one
    token, every sequence alike. Each append fills at most the residual's free rows; a full
    residual is flushed (into the sequence's part of the contiguous cache, or its page through
    a shuffled page table with ``paged``). After each flush and at the end the cache's words
    are checked against the reference's (:mod:`kvdsl.reference.kivi`) layout of every token so
    far (:func:`words_off`: codes a step away accepted, as a GPU's rounding moves them); the
    oracle then holds the device's words where they are accepted and the reference's where
    they are off, so it goes on from the cache the device actually keeps. After the prompt and
    each step every sequence's new token attends over its cache through ``attend`` (its keys
    split into the chunks :func:`~kvdsl.kernels.attend.plan` picks, and ``attend_merge`` where
    they are more than one), checked against float64 attention over the oracle's groups
    (decoded by the reference) and the reference's f16 residual, within
    :func:`attention_bound`. ``kernels``: (append, flush, attend, merge) in place of the
    configs' own (a planted bug's)."""
    h, d, g = kv_heads, head_dim, group
    total = prompt + steps
    layout = {"cache": KiviCache.PAGED, "page_size": page_size} if paged else {}
    append_cfg = KiviAppendConfig(h, d, bits=bits, group=g)
    flush_cfg = KiviFlushConfig(h, d, bits=bits, group=g, **layout)
    where = {"cache": CacheLayout.PAGED, "page_size": page_size} if paged else {}
    attend_cfg = AttendConfig(h, d, q_heads, format=f"kivi{bits}", kivi_group=g, **where)
    append, flush, reader, merge = kernels or (
        kivi_append(append_cfg),
        kivi_flush(flush_cfg),
        attend(attend_cfg),
        attend_merge(attend_cfg),
    )
    rng = np.random.default_rng(seed)
    k, v = (kivi_rows(rng, (batch, total, h, d)) for _ in range(2))
    shape = (total, batch, q_heads, d)
    q = rng.uniform(0.25, 2.0, shape) * rng.choice([-1, 1], shape)
    q = q.astype(F32)
    rows_k, rows_v = k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3)  # [B, H, T, D]
    count = batch * h
    cache = {
        "residual_k": _poison(count * g * d // 2),
        "residual_v": _poison(count * g * d // 2),
    }
    # A contiguous cache is a page of ``seq`` tokens per sequence (kvdsl.kernels.kivi).
    if paged:
        size, pool_name = page_size, "kivi_pages"
        max_pages = -(-total // page_size)
        pages = batch * max_pages + 1
        table = page_table(rng, batch, max_pages, pages)
        cache["page_table"] = table.reshape(-1)
        where = {"maxPages": max_pages}
    else:
        size, pool_name = -(-total // g) * g, "kivi_cache"
        pages, table = batch, np.arange(batch, dtype=np.int32).reshape(batch, 1)
        where = {"seq": size}
    words = kivi.page_words(d, bits, g, size)
    cache[pool_name] = _poison(pages * h * words)
    codes = code_words(d, bits, g, size, pages, h)

    def reference(tokens: int) -> np.ndarray:
        """The quantised cache's words the reference lays out for ``tokens`` tokens."""
        pool = _poison(pages * h * words).reshape(pages, h, words)
        for b in range(batch):
            heads = [
                kivi.quantize(rows_k[b, x, :tokens], rows_v[b, x, :tokens], bits, g)
                for x in range(h)
            ]
            kivi.write_pages(pool, table[b], heads, size)
        return pool.reshape(-1)

    oracle = reference(0)

    def check(tokens: int) -> int:
        """The cache's words off the reference's for ``tokens`` tokens; the oracle takes the
        device's words but those."""
        nonlocal oracle
        want = reference(tokens)
        bad = words_off(cache[pool_name], want, codes, bits)
        oracle = np.where(bad, want, cache[pool_name])
        return int(np.count_nonzero(bad))

    def oracle_head(b: int, x: int, tokens: int) -> kivi.Kivi:
        """Sequence ``b``'s KV head ``x`` as the oracle keeps it for ``tokens`` tokens."""
        n = tokens - tokens % g
        res_k, res_v = (r[b, x, n:tokens].astype(F16) for r in (rows_k, rows_v))
        pool = oracle.reshape(pages, h, words)
        return kivi.read_pages(pool, table[b], x, n, bits, g, size, res_k, res_v)

    def attend_step(step_q: np.ndarray, tokens: int) -> np.ndarray:
        """Every sequence's new token attending over its ``tokens`` keys: ``attend`` over the
        chunks :func:`plan` picks, then ``attend_merge`` where they are more than one."""
        split = plan(attend_cfg, batch=batch, queries=1, longest=tokens)
        rows = batch * q_heads
        bufs = cache | {
            "seqlens_k": np.full(batch, tokens - 1, np.int32),
            "query": step_q.reshape(-1),
            "output": _poison(rows * d).view(F32),
            "partials": _poison(rows * split["chunks"] * (d + 4)).view(F32),
        }
        params = where | split | {"scale": scale}
        out = run(reader, bufs, params)
        if split["chunks"] > 1:
            inputs = {"partials": out["partials"], "output": bufs["output"]}
            keep = {n: split[n] for n in ("batch", "queries", "chunks")}
            out = run(merge, inputs, keep)
        return out["output"].reshape(batch, q_heads, d)

    scale = 1.0 / np.sqrt(d)
    mismatches, flushes, off, past, worst = 0, 0, 0, 0, 0.0
    for n in [prompt] + [1] * steps:
        done = 0
        while done < n:  # pieces that fill the residual, each full one then flushed
            m = min(n - done, g - (past + done) % g)
            piece = {
                name: np.ascontiguousarray(x[:, past + done : past + done + m]).reshape(-1)
                for name, x in (("src_k", k), ("src_v", v))
            }
            params = {"batchSize": batch, "keySeq": m, "pastSeq": past + done}
            res = {name: cache[name] for name in ("residual_k", "residual_v")}
            cache |= {
                name: w for name, w in run(append, piece | res, params).items() if name in res
            }
            done += m
            if (past + done) % g == 0:
                group_params = {"count": count, "flushGroup": (past + done) // g - 1}
                group_params |= where
                out = run(flush, cache, group_params)
                cache |= {name: w for name, w in out.items() if not name.startswith("residual")}
                flushes += 1
                off += check(past + done)
        past += n
        step_q = q[past - 1]
        got = attend_step(step_q, past)
        for b in range(batch):
            for x in range(h):
                back_k, back_v = (
                    y.astype(np.float64) for y in kivi.dequantize(oracle_head(b, x, past))
                )
                for head in range(x * q_heads // h, (x + 1) * q_heads // h):
                    logit = back_k @ step_q[b, head].astype(np.float64) * scale
                    p = np.exp(logit - logit.max())
                    want = p @ back_v / p.sum()
                    bound = attention_bound(back_k, back_v, step_q[b, head], scale, want)
                    with np.errstate(invalid="ignore"):
                        err = np.abs(got[b, head] - want) / bound
                    mismatches += int(np.count_nonzero(~(err <= 1.0)))  # NaN counts
                    worst = max(worst, float(err.max()) if np.isfinite(err).all() else np.inf)
    off += check(past)
    return SessionResult(steps, past, flushes, mismatches, worst, off)
