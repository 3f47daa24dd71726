"""The host contract of ``kivi_append`` and ``kivi_flush`` (:mod:`kvdsl.kernels.kivi`): shape
variables, binding sizes, params meanings and values, requirement sentences.

A host appends ``keySeq`` tokens of ``batch`` sequences into the f16 residual (their first at
``pastSeq``) and flushes a full residual into group ``flushGroup`` of a cache of ``groups``
groups of the variant's ``group`` tokens per (sequence, KV head) (``kivi_cache``); the
``attend`` variants of format ``kivi2`` read it (:mod:`kvdsl.contract.attend`). A paged
variant's groups live in a pool of ``pages`` pages (``kivi_pages``) reached through each
sequence's row of ``maxPages`` entries of ``page_table``, in place of ``groups`` a slice.
"""

from __future__ import annotations

from kvdsl.contract.record import family
from kvdsl.kernels.config import KernelConfig

#: The modes this module describes.
MODES = ("kivi_append", "kivi_flush")

SHAPES: dict[str, tuple[str, ...]] = {
    "kivi_append": ("batch", "keySeq", "pastSeq"),
    "kivi_flush": ("batch", "groups", "flushGroup"),
}

MEANINGS: dict[str, dict[str, str]] = {
    "kivi_append": {
        "batchSize": "sequences in src_k/src_v (BSH) and the residual",
        "keySeq": "new tokens per sequence: at most the residual's free rows",
        "pastSeq": "tokens each sequence held before: the new ones sit at residual rows"
        " (pastSeq + t) % GROUP",
    },
    "kivi_flush": {
        "count": "(sequence, KV head) slices",
        "seq": "the quantised cache's tokens per slice: groups of GROUP tokens",
        "flushGroup": "the group the full residual is quantised into (tokens flushGroup × GROUP"
        " onwards)",
    },
}

MEANINGS["kivi_flush"][
    "maxPages"
] = "entries of each sequence's row of page_table (pages of PAGE_SIZE tokens, whole groups)"

#: A requirement's words → what it keeps true.
REQUIREMENTS: dict[str, str] = {
    "keySeq <= GROUP": "the new tokens fit the residual of GROUP rows (a host flushes a full"
    " residual first and appends at most its free rows, GROUP - pastSeq % GROUP)",
    "flushGroup * GROUP + GROUP <= seq": "the flushed group lies in the cache's seq tokens",
    "flushGroup * GROUP + GROUP <= maxPages * PAGE_SIZE": "the flushed group lies in the"
    " sequence's row of the page table",
}


def says(words: str) -> str | None:
    """What requirement ``words`` of a KIVI kernel keeps true (None: not one of its)."""
    return REQUIREMENTS.get(words)


def shape(cfg: KernelConfig) -> list[str]:
    """The shape variables of ``cfg``'s variant (before ``maxPages``, which a page table adds):
    a paged cache's ``pages`` in place of the contiguous one's ``groups``."""
    own = list(SHAPES[cfg.mode])
    if getattr(cfg, "paged", False):
        own[own.index("groups")] = "pages"
    return own


def formulas(cfg: KernelConfig) -> dict[str, str | None]:
    """Each params field as a formula of the shape variables."""
    if cfg.mode == "kivi_append":
        return {"batchSize": "batch", "keySeq": "keySeq", "pastSeq": "pastSeq"}
    if getattr(cfg, "paged", False):
        return {"count": "batch * kv_heads", "maxPages": "maxPages", "flushGroup": "flushGroup"}
    return {
        "count": "batch * kv_heads",
        "seq": f"groups * {cfg.group}",
        "flushGroup": "flushGroup",
    }


def sizes(cfg: KernelConfig) -> dict[str, tuple[str, int]]:
    """The bindings' sizes: BSH f32 sources of ``kv_heads × head_dim`` values a token; the
    residuals ``kv_heads × GROUP × head_dim / 2`` u32 (f16 pairs) a sequence; the contiguous
    cache ``kv_heads`` parts a (sequence, group): K's and V's codes, ``head_dim × GROUP / PER``
    u32 each, and their stats, ``head_dim`` u32 each; a paged cache's pool ``kv_heads`` parts of
    ``HEAD_WORDS`` words a page and ``maxPages`` table entries a sequence."""
    h, d, g, per = cfg.kv_heads, cfg.head_dim, cfg.group, cfg.per
    residual = ("batch", h * g * d // 2)
    if cfg.mode == "kivi_append":
        src = ("batch * keySeq", h * d)
        return {"src_k": src, "src_v": src, "residual_k": residual, "residual_v": residual}
    out = {"residual_k": residual, "residual_v": residual}
    if getattr(cfg, "paged", False):
        pool = ("pages", h * cfg.head_words)
        return out | {"page_table": ("batch * maxPages", 1), "kivi_pages": pool}
    return out | {"kivi_cache": ("batch * groups", h * 2 * (d * g // per + d))}


#: mode → its contract
CONTRACTS = family(MODES, SHAPES, MEANINGS, sizes, formulas, shape, says)
