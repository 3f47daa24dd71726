"""``kivi_append`` and ``kivi_flush``: KIVI's 2-bit (or 4-bit) cache, contiguous or paged.

The layout is :mod:`kvdsl.reference.kivi`'s (docs/formats.md, "KIVI"), per slice (one sequence's
kv head; ``count`` slices of ``seq`` tokens, ``seq`` a multiple of ``group``), ``PER = 32 / bits``
codes to a u32, the first in the lowest bits:

- ``residual_k``, ``residual_v``: the newest ``< group`` tokens, f16, two to a u32 word (the
  lower channel in the low half): ``[count, GROUP, HEAD_DIM / 2]``; token ``t`` of a slice sits
  at ``t % GROUP``;
- ``kivi_cache`` ``[count, HEAD_WORDS]``: the slice's part, ``HEAD_WORDS = 2 * seq * (HEAD_DIM /
  PER + HEAD_DIM / GROUP)`` words, four arrays in order (:class:`PageParts`):

  - K's codes ``[HEAD_DIM, seq / PER]``: K per channel, packed along the tokens;
  - K's stats ``[HEAD_DIM, seq / GROUP]``: each channel's scale and minimum over a group of
    ``GROUP`` tokens, one u32 ``pack2x16float(scale, min)`` (KIVI keeps scale and minimum in
    two f16 tensors of this shape; here a pair shares a word, so one invocation writes it
    whole);
  - V's codes ``[seq, HEAD_DIM / PER]``: V per token, packed along the channels;
  - V's stats ``[seq, HEAD_DIM / GROUP]``: each token's ``pack2x16float(scale, min)`` per
    ``GROUP`` channels.

  One binding for the four keeps a reader's bindings few: ``attend`` over the cache
  (:mod:`kvdsl.kernels.attend.kivi`) binds seven storage buffers, where four arrays made ten,
  past WebGPU's default eight.

``kivi_append`` writes ``keySeq`` new BSH tokens (f32 ``src_k``, ``src_v``, the tokens
``pastSeq .. pastSeq + keySeq`` of every slice) into the residual as f16 (one invocation per
pair of channels); the host runs ``kivi_flush`` whenever a slice's residual fills, before the
next append, so ``keySeq`` is at most ``GROUP - pastSeq % GROUP`` (the kernel requires
``keySeq <= GROUP``; more than the free rows would overwrite the residual's oldest). kvdsl
quantises V with K, at the flush; KIVI keeps V's newest ``residual_length`` tokens in f16 and
quantises the oldest one a step, and a V row's codes (per token) are the same either way.

``kivi_flush`` quantises the full residual into group ``flushGroup`` (tokens ``flushGroup *
GROUP ..``): one invocation per slice and channel, which quantises that K channel over the
group's ``GROUP`` tokens, and (the same count of items) one token's group of ``GROUP`` V
channels. A group's minimum and maximum are rounded to f16 first; its scale is ``f16((max - min)
/ (2^bits - 1))``; a code is ``clamp(round((x - min) * (1 / scale)), 0, 2^bits - 1)`` (0 where
the scale is 0), as the reference computes it.

With ``cache="paged"`` the quantised groups live in pages of one u32 pool, ``kivi_pages``
(:func:`kvdsl.reference.kivi.page_words`), reached through a page table per sequence (``[batch,
maxPages]`` i32, as the paged modes' ``page_table``): a page holds ``PAGE_SIZE`` tokens (a
multiple of ``GROUP``: whole groups, so a flush writes one page and a group's stats live with its
codes) of every KV head; head ``h`` of page ``p`` is a contiguous slice's part with ``seq =
PAGE_SIZE``, at ``(p * KV_HEADS + h) * HEAD_WORDS``: a contiguous cache is a paged one of one
page of ``seq`` tokens per sequence, page ``b`` sequence ``b``'s. The residual stays per
sequence.
A flush into a page the table marks absent (a negative entry) writes nothing.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from kvdsl.ir import (
    Buffer,
    Dispatch,
    Kernel,
    KernelBuilder,
    Op,
    Val,
    clamp,
    construct,
    convert,
    f32,
    i32,
    largest,
    max_,
    pack2x16float,
    round_,
    select,
    u32,
    unpack2x16float,
    vec,
    with_contract,
)
from kvdsl.kernels.config import CacheConfig, builds, choice, require
from kvdsl.kernels.extents import emax, plus, times
from kvdsl.ir.tree import Expr
from kvdsl.kernels.paged import require_page_size
from kvdsl.nodes.index import flat_index

F32X2 = vec(2, f32)


@dataclass(frozen=True)
class KiviConfig(CacheConfig):
    """A KIVI kernel over ``kv_heads`` heads of ``head_dim``: ``bits`` per code (2 or 4) and
    ``group`` (K's tokens per scale, V's channels per scale)."""

    bits: int = 2
    group: int = 128

    def check_fields(self) -> None:
        require(self.bits in (2, 4), "bits", self.bits, "2 or 4")
        require_groups(self.bits, self.group, self.head_dim)
        require(not self.window, "window", self.window, "false for the KIVI kernels")

    @property
    def per(self) -> int:
        """Codes per u32 word."""
        return 32 // self.bits


def require_groups(
    bits: int, group: Any, head_dim: int, field: str = "group", why: str = ""
) -> None:
    """KIVI's ``group`` (the config's field ``field``): whole words of ``bits``-bit codes (``why``
    ends that message), dividing ``head_dim`` (V's groups of channels)."""
    per = 32 // bits
    ok = isinstance(group, int) and not isinstance(group, bool) and group >= per
    ok = ok and group % per == 0
    require(ok, field, group, f"a multiple of {per} (a word of {bits}-bit codes){why}")
    why = "V's groups of channels"
    require(head_dim % group == 0, "head_dim", head_dim, f"a multiple of {field}={group} ({why})")


def require_whole_groups(page_size: int, group: int, field: str = "group") -> None:
    """A page of ``page_size`` tokens holds whole groups of ``group`` (the field ``field``)."""
    whole = f"a multiple of {field}={group} (a page holds whole groups)"
    require(page_size % group == 0, "page_size", page_size, whole)


class KiviCache(StrEnum):
    """Where the quantised groups live: per slice (``contiguous``), or in pages of a pool
    reached through a page table per sequence (``paged``)."""

    CONTIGUOUS = "contiguous"
    PAGED = "paged"


@dataclass(frozen=True)
class KiviCacheConfig(KiviConfig):
    """A KIVI kernel that reads or writes the quantised groups: ``cache`` contiguous or paged,
    ``page_size`` tokens a page (a multiple of ``group``; unused by a contiguous cache)."""

    cache: KiviCache = choice(KiviCache.CONTIGUOUS)
    page_size: int = 256

    def check_fields(self) -> None:
        super().check_fields()
        if self.cache is KiviCache.PAGED:
            require_page_size(self.page_size)
            require_whole_groups(self.page_size, self.group)

    @property
    def paged(self) -> bool:
        return self.cache is KiviCache.PAGED

    @property
    def head_words(self) -> int:
        """The u32 words of one KV head's part of a page: K's codes and stats, V's codes and
        stats (:func:`kvdsl.reference.kivi.page_words` over the heads)."""
        area = self.head_dim * self.page_size
        return 2 * (area // self.per + area // self.group)


@dataclass(frozen=True)
class PageParts:
    """A page's consts in a kernel: ``PAGE_SIZE``, ``HEAD_WORDS`` (one KV head's words) and
    where K's stats, V's codes and V's stats begin inside a head's part (K's codes at 0)."""

    size: Val
    head_words: Val
    k_stats: Val
    v_codes: Val
    v_stats: Val

    def base(self, page: Val, head: Val, heads: Val) -> Val:
        """The first word of KV head ``head``'s part of page ``page``."""
        return (page * heads + head) * self.head_words


def page_parts(
    kb: KernelBuilder, head_dim: int, bits: int, group: int, size: int | Val
) -> PageParts:
    """The parts (:class:`PageParts`) of a page of ``size`` tokens in ``kb``: consts
    ``PAGE_SIZE``, ``HEAD_WORDS`` and where each part begins for a paged cache's page (``size``
    an int), or lets of a contiguous cache's slice of ``seq`` tokens (``size`` the param)."""
    per = 32 // bits
    if isinstance(size, int):
        codes = head_dim * size // per
        stats = head_dim * size // group
        return PageParts(
            kb.const("PAGE_SIZE", u32, size),
            kb.const("HEAD_WORDS", u32, 2 * (codes + stats)),
            kb.const("K_STATS_AT", u32, codes),
            kb.const("V_CODES_AT", u32, codes + stats),
            kb.const("V_STATS_AT", u32, 2 * codes + stats),
        )
    codes = kb.let("codeWords", size * (head_dim // per))
    stats = kb.let("statWords", size * (head_dim // group))
    return PageParts(
        size,
        kb.let("headWords", (codes + stats) * 2),
        codes,
        kb.let("vCodesAt", codes + stats),
        kb.let("vStatsAt", codes * 2 + stats),
    )


def table_entry(
    kb: KernelBuilder, page_table: Buffer, seq: Val, max_pages: Val, index: Val, name: str
) -> Val:
    """Entry ``index`` of sequence ``seq``'s row of ``page_table`` (``maxPages`` entries a row),
    as the let ``name``."""
    return kb.let(name, page_table[seq * max_pages + index])


def pool_extent(cfg: KiviCacheConfig) -> Expr:
    """The least words of ``kivi_pages``: every page the table names."""
    return times(emax(plus(largest("page_table"), 1), 0), cfg.kv_heads * cfg.head_words)


@dataclass(frozen=True)
class KiviAppendConfig(KiviConfig):
    mode = "kivi_append"


@dataclass(frozen=True)
class KiviFlushConfig(KiviCacheConfig):
    mode = "kivi_flush"


def _consts(kb: KernelBuilder, cfg: KiviConfig) -> tuple[Val, Val, Val]:
    d = kb.const("HEAD_DIM", u32, cfg.head_dim)
    g = kb.const("GROUP", u32, cfg.group)
    kb.workgroup_const("WG")
    return d, g, kb.const("KV_HEADS", u32, cfg.kv_heads)


@builds(KiviAppendConfig)
def kivi_append(cfg: KiviAppendConfig, name: str = "kivi_append") -> Kernel:
    """Build the append of new BSH tokens into the f16 residual."""
    kb = KernelBuilder(name, cfg.workgroup_size)
    src_k = kb.binding("src_k", f32, "read")
    src_v = kb.binding("src_v", f32, "read")
    res_k = kb.binding("residual_k", u32, "read_write")
    res_v = kb.binding("residual_v", u32, "read_write")
    d, g, heads = _consts(kb, cfg)
    half = kb.const("HALF_DIM", u32, cfg.head_dim // 2)
    batch_size, key_seq, past = kb.param("batchSize"), kb.param("keySeq"), kb.param("pastSeq")
    i = flat_index(kb, cfg.fold, "i", bound=batch_size * heads * key_seq * half)
    pair = kb.let("pair", i % half)
    t = kb.let("t", i / half % key_seq)
    slice_ = kb.let("slice", i / (half * key_seq))
    head = kb.let("head", slice_ % heads)
    batch = kb.let("batch", slice_ / heads)
    src = kb.let("src", ((batch * key_seq + t) * heads + head) * d + pair * 2)
    dst = kb.let("dst", (slice_ * g + (past + t) % g) * half + pair)
    res_k[dst] = pack2x16float(construct(F32X2, src_k[src], src_k[src + 1]))
    res_v[dst] = pack2x16float(construct(F32X2, src_v[src], src_v[src + 1]))
    items = batch_size * heads * key_seq * half
    doc = (
        "KIVI: new BSH K/V tokens into the f16 residual (two channels to a word), token\n"
        "pastSeq + t at residual row (pastSeq + t) % GROUP; one invocation per pair."
    )
    kernel = kb.build(Dispatch(items.node, cfg.workgroup_size, cfg.fold), doc)
    new = times(batch_size, key_seq, heads, d)
    res = times(batch_size, heads, g, half)
    return with_contract(
        kernel,
        {"src_k": new, "src_v": new, "residual_k": res, "residual_v": res},
        {"keySeq <= GROUP": key_seq <= g},
    )


def _quantise(kb: KernelBuilder, cfg: KiviConfig, tag: str, load, store_code, store_stats) -> None:
    """Quantise the ``GROUP`` values ``load(e)`` asymmetrically: the f16 minimum and scale,
    then the codes ``PER`` to a word, ``store_code(word_index, word)``, and
    ``store_stats(pack2x16float(scale, min))``."""
    qmax = (1 << cfg.bits) - 1
    lo = kb.var(f"{tag}Lo", f32, load(0))
    hi = kb.var(f"{tag}Hi", f32, lo)
    with kb.for_range(f"{tag}E", 1, cfg.group) as e:
        x = kb.let(f"{tag}X", load(e))
        lo.set(select(lo, x, x < lo))
        hi.set(select(hi, x, x > hi))
    bounds = kb.let(f"{tag}Bounds", unpack2x16float(pack2x16float(construct(F32X2, lo, hi))))
    mn, mx = kb.let(f"{tag}Min", bounds.x), kb.let(f"{tag}Max", bounds.y)
    step = (mx - mn) / float(qmax)
    scale = kb.let(f"{tag}Scale", unpack2x16float(pack2x16float(construct(F32X2, step, 0.0))).x)
    inv = kb.let(f"{tag}Inv", select(0.0, 1.0 / scale, scale > 0.0))
    with kb.for_range(f"{tag}W", 0, cfg.group // cfg.per) as w:
        word = kb.var(f"{tag}Word", u32, 0)
        with kb.for_range(f"{tag}L", 0, cfg.per) as lane:
            x = load(w * cfg.per + lane)
            q = clamp(round_((x - mn) * inv), 0.0, float(qmax))
            word.set(convert(u32, q) << (lane * cfg.bits), Op.OR)
        store_code(w, word)
    store_stats(pack2x16float(construct(F32X2, scale, mn)))


@builds(KiviFlushConfig)
def kivi_flush(cfg: KiviFlushConfig, name: str = "kivi_flush") -> Kernel:
    """Build the flush of a full residual into group ``flushGroup`` of the quantised cache: a
    contiguous cache's part of the slice, or the page the sequence's table names."""
    kb = KernelBuilder(name, cfg.workgroup_size)
    res_k = kb.binding("residual_k", u32, "read")
    res_v = kb.binding("residual_v", u32, "read")
    if cfg.paged:
        page_table = kb.binding("page_table", i32, "read")
        pool = kb.binding("kivi_pages", u32, "read_write")
    else:
        pool = kb.binding("kivi_cache", u32, "read_write")
    d, g, heads = _consts(kb, cfg)
    per = kb.const("PER", u32, cfg.per)
    half = kb.const("HALF_DIM", u32, cfg.head_dim // 2)
    vgroups = kb.const("V_GROUPS", u32, cfg.head_dim // cfg.group)
    if cfg.paged:
        parts = page_parts(kb, cfg.head_dim, cfg.bits, cfg.group, cfg.page_size)
        groups = kb.const("PAGE_GROUPS", u32, cfg.page_size // cfg.group)
        count, max_pages, flush = kb.param("count"), kb.param("maxPages"), kb.param("flushGroup")
    else:
        count, seq, flush = kb.param("count"), kb.param("seq"), kb.param("flushGroup")
    i = flat_index(kb, cfg.fold, "i", bound=count * d)
    slice_ = kb.let("slice", i / d)
    r = kb.let("r", i % d)
    if cfg.paged:
        kb.comment("The group's page: entry flushGroup / PAGE_GROUPS of the sequence's table.")
        entry = table_entry(kb, page_table, slice_ / heads, max_pages, flush / groups, "entry")
        page = kb.let("page", max_(entry, 0).to(u32))
        base = kb.let("base", parts.base(page, slice_ % heads, heads))
        in_page = kb.let("inPage", flush % groups)
    else:
        kb.comment("The slice's part of the cache: seq tokens' codes and stats.")
        parts = page_parts(kb, cfg.head_dim, cfg.bits, cfg.group, seq)
        groups = kb.let("groups", seq / g)
        base = kb.let("base", slice_ * parts.head_words)
        in_page = flush
    first = kb.let("first", in_page * g)

    def half_of(buf, row: Val, c: Val) -> Val:
        return unpack2x16float(buf[(slice_ * g + row) * half + c / 2])[c % 2]

    with kb.if_(entry >= 0) if cfg.paged else nullcontext():
        kb.comment("K channel r over the group's GROUP tokens.")

        def k_code(w: Val, word: Val) -> None:
            pool[base + r * (parts.size / per) + first / per + w] = word

        def k_stat(word: Val) -> None:
            pool[base + parts.k_stats + r * groups + in_page] = word

        _quantise(kb, cfg, "k", lambda e: half_of(res_k, e, r), k_code, k_stat)
        kb.comment("V: token r / V_GROUPS of the group, its channels (r % V_GROUPS) * GROUP ...")
        t = kb.let("vToken", r / vgroups)
        c0 = kb.let("vFirst", r % vgroups * g)
        v_row = kb.let("vRow", first + t)

        def v_code(w: Val, word: Val) -> None:
            pool[base + parts.v_codes + v_row * (d / per) + c0 / per + w] = word

        def v_stat(word: Val) -> None:
            pool[base + parts.v_stats + v_row * vgroups + r % vgroups] = word

        _quantise(kb, cfg, "v", lambda e: half_of(res_v, t, c0 + e), v_code, v_stat)
    items = count * d
    res = times(count, g, half)
    extents = {"residual_k": res, "residual_v": res}
    if cfg.paged:
        doc = (
            "KIVI, paged: the full f16 residual into quantised group flushGroup, in the page the\n"
            "sequence's table names (a negative entry: nothing written); per invocation one K\n"
            "channel over GROUP tokens and one token's GROUP V channels."
        )
        extents |= {"page_table": times(count / heads, max_pages), "kivi_pages": pool_extent(cfg)}
        fits = "flushGroup * GROUP + GROUP <= maxPages * PAGE_SIZE"
        requires = {fits: flush * g + g <= max_pages * cfg.page_size}
    else:
        doc = (
            "KIVI: the full f16 residual into quantised group flushGroup of the slice's part: per\n"
            "invocation one K channel over GROUP tokens and one token's GROUP V channels (min/max,\n"
            "f16 scale, codes)."
        )
        part = 2 * (cfg.head_dim // cfg.per + cfg.head_dim // cfg.group)
        extents["kivi_cache"] = times(count, seq, part)
        requires = {"flushGroup * GROUP + GROUP <= seq": flush * g + g <= seq}
    kernel = kb.build(Dispatch(items.node, cfg.workgroup_size, cfg.fold), doc)
    return with_contract(kernel, extents, requires)
