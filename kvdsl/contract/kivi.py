"""The host contract of ``kivi_append`` and ``kivi_flush`` (:mod:`kvdsl.kernels.kivi`): shape
variables, binding sizes, params meanings and values, requirement sentences.

A host appends ``keySeq`` tokens of ``batch`` sequences into the f16 residual (their first at
``pastSeq``), and flushes a full residual into group ``flushGroup`` of a cache of ``seq`` tokens
per (sequence, KV head) (``groups`` groups of the variant's ``group`` tokens).
"""

from __future__ import annotations

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

#: A requirement's words → what it keeps true.
REQUIREMENTS: dict[str, str] = {
    "keySeq <= GROUP": "the new tokens fit the residual of GROUP rows (a host flushes a full"
    " residual first and appends at most its free rows, GROUP - pastSeq % GROUP)",
    "flushGroup * GROUP + GROUP <= seq": "the flushed group lies in the cache's seq tokens",
}


def says(words: str) -> str | None:
    """What requirement ``words`` of a KIVI kernel keeps true (None: not one of its)."""
    return REQUIREMENTS.get(words)


def formulas(cfg: KernelConfig) -> dict[str, str | None]:
    """Each params field as a formula of the shape variables."""
    if cfg.mode == "kivi_append":
        return {"batchSize": "batch", "keySeq": "keySeq", "pastSeq": "pastSeq"}
    return {
        "count": "batch * kv_heads",
        "seq": f"groups * {cfg.group}",
        "flushGroup": "flushGroup",
    }


def sizes(cfg: KernelConfig) -> dict[str, tuple[str, int]]:
    """The bindings' sizes: BSH f32 sources of ``kv_heads × head_dim`` values a token; the
    residuals ``kv_heads × GROUP × head_dim / 2`` u32 (f16 pairs) a sequence; the codes
    ``kv_heads × head_dim × GROUP / PER`` u32 and the stats ``kv_heads × head_dim`` u32 a
    (sequence, group)."""
    h, d, g, per = cfg.kv_heads, cfg.head_dim, cfg.group, cfg.per
    residual = ("batch", h * g * d // 2)
    if cfg.mode == "kivi_append":
        src = ("batch * keySeq", h * d)
        return {"src_k": src, "src_v": src, "residual_k": residual, "residual_v": residual}
    codes, stats = ("batch * groups", h * d * g // per), ("batch * groups", h * d)
    return {
        "residual_k": residual,
        "residual_v": residual,
        "k_codes": codes,
        "k_stats": stats,
        "v_codes": codes,
        "v_stats": stats,
    }
