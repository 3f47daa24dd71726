"""The host contract of ``kivi_append``, ``kivi_flush`` (:mod:`kvdsl.kernels.kivi`) and
``kivi_attend`` (:mod:`kvdsl.kernels.kivi_attend`): shape variables, binding sizes, params
meanings and values, requirement sentences.

A host appends ``keySeq`` tokens of ``batch`` sequences into the f16 residual (their first at
``pastSeq``), flushes a full residual into group ``flushGroup`` of a cache of ``groups`` groups
of the variant's ``group`` tokens per (sequence, KV head), and attends one new token of each
sequence over its ``total`` tokens (``scale`` the model's number, no formula of the shape).
A paged variant's groups live in a pool of ``pages`` pages (``kivi_pages``) reached through each
sequence's row of ``maxPages`` entries of ``page_table``, in place of ``groups`` a slice.
"""

from __future__ import annotations

import re

from kvdsl.kernels.config import KernelConfig

#: The modes this module describes.
MODES = ("kivi_append", "kivi_flush", "kivi_attend")

SHAPES: dict[str, tuple[str, ...]] = {
    "kivi_append": ("batch", "keySeq", "pastSeq"),
    "kivi_flush": ("batch", "groups", "flushGroup"),
    "kivi_attend": ("batch", "total", "groups"),
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
    "kivi_attend": {
        "batch": "sequences, one new token (query row per query head) each",
        "total": "tokens each sequence holds: the quantised groups, then the residual's",
        "seq": "the quantised cache's tokens per (sequence, KV head): groups of GROUP tokens",
        "scale": "the logits' scale (1 / sqrt(head_dim) for most models): the host gives it",
    },
}

_TABLE = "entries of each sequence's row of page_table (pages of PAGE_SIZE tokens, whole groups)"
for _mode in ("kivi_flush", "kivi_attend"):
    MEANINGS[_mode]["maxPages"] = _TABLE

#: A requirement's words → what it keeps true.
REQUIREMENTS: dict[str, str] = {
    "keySeq <= GROUP": "the new tokens fit the residual of GROUP rows (a host flushes a full"
    " residual first and appends at most its free rows, GROUP - pastSeq % GROUP)",
    "flushGroup * GROUP + GROUP <= seq": "the flushed group lies in the cache's seq tokens",
    "total <= seq": "every sequence's tokens fit the quantised cache's capacity",
    "total >= 1": "every sequence holds at least one token",
    "flushGroup * GROUP + GROUP <= maxPages * PAGE_SIZE": "the flushed group lies in the"
    " sequence's row of the page table",
}
#: The paged attention's capacity, its page size in the words.
_PAGED_TOTAL = re.compile(r"total <= maxPages \* \d+")


def says(words: str) -> str | None:
    """What requirement ``words`` of a KIVI kernel keeps true (None: not one of its)."""
    if _PAGED_TOTAL.fullmatch(words):
        return "every sequence's tokens fit its row of the page table"
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
    paged = getattr(cfg, "paged", False)
    if cfg.mode == "kivi_attend":
        cache = {"maxPages": "maxPages"} if paged else {"seq": f"groups * {cfg.group}"}
        return {"batch": "batch", "total": "total"} | cache | {"scale": None}
    if paged:
        return {"count": "batch * kv_heads", "maxPages": "maxPages", "flushGroup": "flushGroup"}
    return {
        "count": "batch * kv_heads",
        "seq": f"groups * {cfg.group}",
        "flushGroup": "flushGroup",
    }


def sizes(cfg: KernelConfig) -> dict[str, tuple[str, int]]:
    """The bindings' sizes: BSH f32 sources of ``kv_heads × head_dim`` values a token; the
    residuals ``kv_heads × GROUP × head_dim / 2`` u32 (f16 pairs) a sequence; the codes
    ``kv_heads × head_dim × GROUP / PER`` u32 and the stats ``kv_heads × head_dim`` u32 a
    (sequence, group); a paged cache's pool ``kv_heads`` parts of ``HEAD_WORDS`` words a page
    and ``maxPages`` table entries a sequence."""
    h, d, g, per = cfg.kv_heads, cfg.head_dim, cfg.group, cfg.per
    residual = ("batch", h * g * d // 2)
    if cfg.mode == "kivi_append":
        src = ("batch * keySeq", h * d)
        return {"src_k": src, "src_v": src, "residual_k": residual, "residual_v": residual}
    if getattr(cfg, "paged", False):
        out = {"residual_k": residual, "residual_v": residual}
        out |= {"page_table": ("batch * maxPages", 1), "kivi_pages": ("pages", h * cfg.head_words)}
        if cfg.mode == "kivi_attend":
            out |= {"query": ("batch", cfg.q_heads * d), "output": ("batch", cfg.q_heads * d)}
        return out
    if cfg.mode == "kivi_attend":
        rows, codes = ("batch", cfg.q_heads * d), ("batch * groups", h * d * g // per)
        stats = ("batch * groups", h * d)
        return {
            "query": rows,
            "residual_k": residual,
            "residual_v": residual,
            "k_codes": codes,
            "k_stats": stats,
            "v_codes": codes,
            "v_stats": stats,
            "output": rows,
        }
    codes, stats = ("batch * groups", h * d * g // per), ("batch * groups", h * d)
    return {
        "residual_k": residual,
        "residual_v": residual,
        "k_codes": codes,
        "k_stats": stats,
        "v_codes": codes,
        "v_stats": stats,
    }
