"""The host contract of ``attend`` and ``attend_merge`` (:mod:`kvdsl.kernels.attend`): shape
variables, binding sizes, params meanings and values, requirement sentences.

A host runs an ``attend`` variant over ``batch`` sequences of ``queries`` new tokens each, its
keys cut into ``chunks`` ranges of ``chunk`` keys (:func:`kvdsl.kernels.attend.plan` picks
both from the shape); with ``chunks`` more than one the variant writes ``partials`` and the
``attend_merge`` variant of the same query heads, head dim, sinks and output turns them into
``output``. The cache adds ``seq`` (a contiguous cache's capacity) or ``pages`` (a paged
cache's pool; ``maxPages`` is added wherever a kernel binds ``page_table``); a sliding window
adds ``window``; the template's int8 or int4 cache adds ``perChannel`` (its ``kv_scale``
holds a scale pair per channel, or one); a contiguous KIVI cache has ``groups`` (groups of
``kivi_group`` keys per sequence: ``seq`` is ``groups × kivi_group``) in place of ``seq``.
``scale`` and ``softcap`` are the model's numbers, no formula of the shape: their params fields
have no value.
"""

from __future__ import annotations

import re

from kvdsl.kernels.attend import CacheLayout
from kvdsl.kernels.attend.config import row_blocks
from kvdsl.contract.record import family
from kvdsl.kernels.config import KernelConfig

#: The modes this module describes.
MODES = ("attend", "attend_merge")

#: mode → the shape variables every variant has (:func:`shape` adds the cache's and options').
SHAPES: dict[str, tuple[str, ...]] = {
    "attend": ("batch", "queries", "chunk", "chunks"),
    "attend_merge": ("batch", "queries", "chunks"),
}

_BATCH = "sequences (rows of seqlens_k)"
_QUERIES = "new tokens per sequence (query rows per sequence and head), their keys the last"
_CHUNKS = "key ranges per sequence: 1 writes output itself, more write partials for the merge"

#: mode → params field → its meaning in words (the ``attend`` fields a variant lacks unused).
MEANINGS: dict[str, dict[str, str]] = {
    "attend": {
        "batch": _BATCH,
        "seq": "the contiguous cache's capacity: rows per (sequence, KV head) of key and value",
        "maxPages": "entries of each sequence's row of page_table",
        "queries": _QUERIES,
        "chunk": "keys a workgroup reads: chunk × chunks covers every sequence's rows"
        " (seqlens_k + 1), chunk at most the variant's MAX_CHUNK (kvdsl.kernels.attend.plan"
        " picks chunk and chunks)",
        "chunks": _CHUNKS,
        "rowBlocks": "blocks of ROWS query rows per KV head: ceil(GROUP × queries / ROWS)",
        "scale": "the logits' scale (1 / sqrt(head_dim) for most models): the host gives it",
        "window": "keys a new token sees: itself and the window - 1 before it",
        "softcap": "the logit soft-cap c (logits become c × tanh(logit / c)): the host gives it",
        "perChannel": "1: kv_scale's (k, v) pairs hold one scale per channel (kv_heads ×"
        " head_dim); 0: one pair for every channel",
    },
    "attend_merge": {
        "batch": _BATCH,
        "queries": _QUERIES,
        "chunks": "partials per query row: the chunks of the attend dispatch that wrote them",
    },
}

#: A requirement's words (a pattern of the kernel's text) → what it keeps true.
REQUIREMENTS: list[tuple[str, str]] = [
    (r"queries >= 1", "a dispatch brings at least one new token per sequence"),
    (
        r"queries <= \d+",
        "the new tokens per sequence are at most the variant's max_queries",
    ),
    (
        r"rowBlocks \* \d+ >= \d+ \* queries",
        "the row blocks cover the GROUP × queries query rows of each KV head, ROWS a block",
    ),
    (r"chunk <= \d+", "a chunk's logits fit the workgroup memory: at most MAX_CHUNK keys"),
    (
        r"chunk \* chunks >= seqlens_k\.max \+ 1",
        "the chunks cover every sequence's rows up to its last (seqlens_k + 1)",
    ),
    (
        r"seq >= seqlens_k\.max \+ 1",
        "every sequence's rows fit the cache's capacity (rows past it are another head's)",
    ),
    (
        r"maxPages \* \d+ >= seqlens_k\.max \+ 1",
        "every sequence's rows fit its row of the page table (entries past it are another "
        "sequence's)",
    ),
]


def says(words: str) -> str | None:
    """What requirement ``words`` of an ``attend`` kernel keeps true (None: not one of its)."""
    for pattern, sentence in REQUIREMENTS:
        if re.fullmatch(pattern, words):
            return sentence
    return None


def shape(cfg: KernelConfig) -> list[str]:
    """The shape variables of ``cfg``'s variant (before ``maxPages``, which a page table adds):
    the mode's, then the cache's (``seq`` or ``pages``, and ``perChannel`` for the template's
    cache), ``window`` with a sliding window, and ``rowBlocks`` where its value is no formula of
    ``queries``."""
    own = list(SHAPES[cfg.mode])
    if cfg.mode == "attend_merge":
        return own
    if cfg.kivi_bits is not None and cfg.cache is CacheLayout.BNSH:
        own.append("groups")
    else:
        own.append("seq" if cfg.cache is CacheLayout.BNSH else "pages")
    own += ["perChannel"] if cfg.template_bits is not None else []
    own += ["window"] if cfg.sliding_window else []
    return own + (["rowBlocks"] if row_blocks(cfg) is None else [])


def formulas(cfg: KernelConfig) -> dict[str, str | None]:
    """Each params field as a formula of the shape variables (None: ``scale``, ``softcap``)."""
    own: dict[str, str | None] = {k: k for k in SHAPES[cfg.mode]}
    if cfg.mode == "attend_merge":
        return own
    if cfg.cache is CacheLayout.PAGED:
        own["maxPages"] = "maxPages"
    else:
        own["seq"] = "seq" if cfg.kivi_bits is None else f"groups * {cfg.kivi_group}"
    own |= {"perChannel": "perChannel"} if cfg.template_bits is not None else {}
    own |= {"rowBlocks": row_blocks(cfg) or "rowBlocks", "scale": None}
    own |= {"window": "window"} if cfg.sliding_window else {}
    return own | ({"softcap": None} if cfg.softcap else {})


def meanings(cfg: KernelConfig) -> dict[str, str]:
    """The meaning of each params field of ``cfg``'s variant, GROUP and ROWS its numbers."""
    own = dict(MEANINGS[cfg.mode])
    if cfg.mode == "attend":
        rows = own["rowBlocks"].replace("GROUP", str(cfg.group)).replace("ROWS", str(cfg.rows))
        own["rowBlocks"] = rows
    return own


def _row_values(cfg: KernelConfig) -> int:
    """Host values of one cache row: ``head_dim`` f32 or f16 values, the template's int8 (one
    i32 a value) or int4 (two values a u32) words, or a format's u32 words with its inline
    scales (:meth:`~kvdsl.nodes.formats.Format.row_words`)."""
    if cfg.template_bits is not None:
        return cfg.head_dim if cfg.template_bits == 8 else cfg.head_dim // 2
    if cfg.fmt is not None:
        return cfg.fmt.row_words(cfg.head_dim, cfg.inline)
    return cfg.head_dim


def sizes(cfg: KernelConfig) -> dict[str, tuple[str, int]]:
    """The bindings' sizes: Q and O ``q_heads × head_dim`` values per (sequence, new token);
    the partials ``q_heads × (head_dim + 4)`` f32 per (sequence, new token, chunk) (a row's
    unnormalised output, then its maximum, sum and two zeros); the sinks one f32 per query
    head; a contiguous cache ``kv_heads`` rows (:func:`_row_values`) per (sequence, row), its
    side scales ``kv_heads × side_words`` f32 (K's then V's a row); a paged one ``page_size ×
    kv_heads`` rows per page of each pool, its scale pages' f32, and ``maxPages`` entries per
    sequence's table; the template's ``kv_scale`` one (k, v) pair per channel or one."""
    heads, d = cfg.q_heads, cfg.head_dim
    out = {
        "seqlens_k": ("batch", 1),
        "query": ("batch * queries", heads * d),
        "output": ("batch * queries", heads * d),
        "partials": ("batch * queries * chunks", heads * (d + 4)),
        "sinks": ("1", heads),
    }
    if cfg.mode == "attend_merge":
        return out
    if cfg.kivi_bits is not None:
        return out | _kivi_sizes(cfg)
    row = cfg.kv_heads * _row_values(cfg)
    if cfg.template_bits is not None:
        out["kv_scale"] = (f"perChannel * {cfg.kv_heads * d - 1} + 1", 2)
    if cfg.cache is CacheLayout.BNSH:
        rows = ("batch * seq", row)
        out |= {"key": rows, "value": rows}
        return out | (
            {"scales": ("batch * seq", cfg.kv_heads * cfg.side_words)} if cfg.side_words else {}
        )
    page = cfg.page_size * row
    pools = {"key_pages": ("pages", page), "value_pages": ("pages", page)}
    sides = cfg.scale_geometry
    out |= {} if sides is None else {"scale_pages": ("pages", sides.stride)}
    return out | pools | {"kv_pages": ("pages", 2 * page), "page_table": ("batch * maxPages", 1)}


def _kivi_sizes(cfg: KernelConfig) -> dict[str, tuple[str, int]]:
    """A KIVI cache's bindings: the residuals ``kv_heads × GROUP × head_dim / 2`` u32 (f16
    pairs) a sequence; the groups ``kv_heads`` parts a (sequence, group) of contiguous
    ``kivi_cache`` (K's and V's codes, ``head_dim × GROUP / PER`` words each, and their stats,
    ``head_dim`` words each), or ``kv_heads`` parts of ``page_size`` keys a page of
    ``kivi_pages`` and ``maxPages`` entries a sequence's table."""
    h, d, g = cfg.kv_heads, cfg.head_dim, cfg.kivi_group
    per = 32 // cfg.kivi_bits
    residual = ("batch", h * g * d // 2)
    out = {"residual_k": residual, "residual_v": residual}
    if cfg.cache is CacheLayout.BNSH:
        return out | {"kivi_cache": ("batch * groups", h * 2 * (d * g // per + d))}
    words = 2 * cfg.page_size * (d // per + d // g)
    return out | {"kivi_pages": ("pages", h * words), "page_table": ("batch * maxPages", 1)}


#: mode → its contract
CONTRACTS = family(MODES, SHAPES, MEANINGS, sizes, formulas, shape, says, meanings)
