"""The host contracts of the cache modes (every mode but ``attend``'s and KIVI's), one
:class:`~kvdsl.contract.record.Contract` each, each beside its sizes: the template's
(:mod:`kvdsl.kernels.transpose`, ``copy``, ``merge``, ``merge_share``, ``window_shift``,
``build``, ``build_quant``, ``append_quant``), the dense caches' (``dense``, ``qkv``,
``dense_modes``, ``dense_convert``) and the paged caches' (``paged_append``, ``paged_read``,
``paged_pages``, ``qkv_paged``)."""

from __future__ import annotations

from kvdsl.contract.record import PER_CHANNEL, TABLE_ENTRIES, Contract, Sizes, count_only
from kvdsl.contract.record import dense_cache, pool_pages, present, quant_row_words, region_rows
from kvdsl.contract.record import rotary, row_sources, table_field
from kvdsl.kernels.build import BuildConfig
from kvdsl.kernels.config import PAST, PRESENT, ROTARY_TABLE
from kvdsl.kernels.copy import CopyConfig
from kvdsl.kernels.dense import DenseAppendConfig, DenseBuildConfig, DenseReadConfig
from kvdsl.kernels.dense_convert import DenseConvertConfig
from kvdsl.kernels.dense_modes import DenseMoveConfig, DenseWindowShiftConfig
from kvdsl.kernels.merge import MergeConfig
from kvdsl.kernels.merge_share import MergeShareConfig
from kvdsl.kernels.paged import COMBINED_POOL, POOLS, SCALE_POOL, PagedAppendConfig
from kvdsl.kernels.paged import PagedReadConfig
from kvdsl.kernels.paged_pages import COMPACT_COMBINED, COMPACT_POOLS, COMPACT_SCALES
from kvdsl.kernels.paged_pages import PagedCompactConfig, PagedCopyConfig, PagedWindowConfig
from kvdsl.kernels.qkv import QkvConfig
from kvdsl.kernels.qkv_paged import PagedQkvConfig
from kvdsl.kernels.quant import AppendQuantConfig, BuildQuantConfig
from kvdsl.kernels.transpose import TransposeConfig
from kvdsl.kernels.window_shift import WindowShiftConfig

#: mode → its contract
CONTRACTS: dict[str, Contract] = {}

#: What a fused QKV pass's ``count`` counts (``qkv``, ``paged_qkv``).
QKV_ROWS = (
    "rows: every head of every new token (with a dense format not split, a K head and its V head"
    " are one row)"
)


def _merge_params(cfg: MergeConfig) -> dict[str, str | None]:
    own = {"count": "batch * kv_heads * (pastSeq + keySeq)", "seq": "pastSeq + keySeq"}
    return own | {"pastSeq": "pastSeq", "keySeq": "keySeq"}


def _append_quant_params(cfg: AppendQuantConfig) -> dict[str, str | None]:
    # pastSeq is the host's choice with rotary_position="past_seq": no formula
    past = "0" if cfg.rotary_position.value == "row" else None
    own = {"count": "batch * kv_heads * seq", "seq": "seq", "pastSeq": past}
    return own | {"totalSeq": "totalSeq", "perChannel": "perChannel"}


def transpose_sizes(cfg: TransposeConfig) -> Sizes:
    """BSH key/value in, BNSH present out: a token's ``hidden`` values each."""
    rows = "batch * kvSeq"
    return {"key": (rows, cfg.hidden), "value": (rows, cfg.hidden)} | present(rows, cfg.hidden)


CONTRACTS["transpose"] = Contract(
    shape=("batch", "kvSeq"),
    meanings={
        "batchSize": "batches in key/value (BSH) and present_key/present_value (BNSH)",
        "kvSeq": "tokens per batch",
    },
    sizes=transpose_sizes,
    params=lambda cfg: {"batchSize": "batch", "kvSeq": "kvSeq"},
    rows=lambda cfg: "kvSeq",
)


def copy_sizes(cfg: CopyConfig) -> Sizes:
    """``rows`` rows of ``head_dim`` values in and out."""
    src = {"src_k": ("rows", cfg.head_dim), "src_v": ("rows", cfg.head_dim)}
    return src | present("rows", cfg.head_dim)


CONTRACTS["copy"] = Contract(
    shape=("rows",),
    meanings={
        "count": "rows of head_dim values to copy from src to present",
    },
    sizes=copy_sizes,
    params=count_only("rows"),
)


def merge_sizes(cfg: MergeConfig) -> Sizes:
    """Past BNSH and new BSH in, present BNSH of ``pastSeq + keySeq`` tokens out."""
    return {
        "past_k": ("batch * pastSeq", cfg.hidden),
        "past_v": ("batch * pastSeq", cfg.hidden),
        "new_k": ("batch * keySeq", cfg.hidden),
        "new_v": ("batch * keySeq", cfg.hidden),
    } | present("batch * (pastSeq + keySeq)", cfg.hidden)


CONTRACTS["merge"] = Contract(
    shape=("batch", "pastSeq", "keySeq"),
    meanings={
        "count": "present rows",
        "seq": "present tokens per head",
        "pastSeq": "past tokens per head (rows of past_k/past_v per head)",
        "keySeq": "new tokens per batch (rows of new_k/new_v per batch)",
    },
    sizes=merge_sizes,
    params=_merge_params,
    rows=lambda cfg: "(pastSeq + keySeq)",
)


def window_sizes(cfg: MergeShareConfig | WindowShiftConfig) -> Sizes:
    """The buffer-sharing and sliding-window caches: past and present of ``seq`` rows per head."""
    return (
        {
            "seqlens_k": ("batch", 1),
            "past_k": ("batch * seq", cfg.hidden),
            "past_v": ("batch * seq", cfg.hidden),
            "new_k": ("batch * keySeq", cfg.hidden),
            "new_v": ("batch * keySeq", cfg.hidden),
        }
        | rotary(cfg)
        | present("batch * seq", cfg.hidden)
    )


CONTRACTS["merge_share"] = Contract(
    shape=("batch", "seq", "keySeq"),
    meanings={
        "count": "rows the pass owns: the cache's (retain) or the new tokens' (append)",
        "seq": "the cache's capacity: rows per head of past and present",
        "keySeq": "new tokens per batch (rows of new_k/new_v per batch)",
    },
    sizes=window_sizes,
    rows=region_rows,
)


CONTRACTS["window_shift"] = Contract(
    shape=("batch", "seq", "keySeq"),
    meanings={
        "count": "rows the pass owns: the window's (all, shift) or the new tokens' (append)",
        "seq": "the window's capacity: rows per head of past and present",
        "keySeq": "new tokens per batch (rows of new_k/new_v per batch)",
    },
    sizes=window_sizes,
    rows=region_rows,
)


def build_sizes(cfg: BuildConfig) -> Sizes:
    """New BSH in, a BNSH present of ``seq`` tokens out."""
    return row_sources(cfg) | present("batch * seq", cfg.hidden)


CONTRACTS["build"] = Contract(
    shape=("batch", "seq", "pastSeq"),
    meanings={
        "count": "present rows",
        "seq": "new tokens per batch, also the present's rows per head",
        "pastSeq": "absolute position of token 0 (the rotary row; unused without rotary)",
    },
    sizes=build_sizes,
)


def build_quant_sizes(cfg: BuildQuantConfig) -> Sizes:
    """As :func:`build_sizes`, the present in quantised words."""
    return row_sources(cfg) | present("batch * seq", quant_row_words(cfg))


CONTRACTS["build_quant"] = Contract(
    shape=("batch", "seq", "pastSeq", "perChannel"),
    meanings={
        "count": "present rows",
        "seq": "new tokens per batch, also the present's rows per head",
        "pastSeq": "absolute position of token 0 (the rotary row; unused without rotary)",
        "perChannel": PER_CHANNEL,
    },
    sizes=build_quant_sizes,
)


def append_quant_sizes(cfg: AppendQuantConfig) -> Sizes:
    """New BSH in, a quantised present of ``totalSeq`` rows per head."""
    return row_sources(cfg) | present("batch * totalSeq", quant_row_words(cfg))


CONTRACTS["append_quant"] = Contract(
    shape=("batch", "seq", "totalSeq", "perChannel"),
    meanings={
        "count": "new rows",
        "seq": "new tokens per batch (rows of src_k/src_v per batch)",
        "pastSeq": "rotary position of token 0 when rotary_position is past_seq; else unused (0)",
        "totalSeq": "the cache's capacity: rows per head of present_key/present_value",
        "perChannel": PER_CHANNEL,
    },
    sizes=append_quant_sizes,
    params=_append_quant_params,
)


def qkv_params(cfg: QkvConfig | PagedQkvConfig) -> dict[str, str | None]:
    heads = "(q_heads + 2 * kv_heads)"
    if cfg.format is not None and not cfg.split:
        heads = "(q_heads + kv_heads)"  # a K head and its V head are one row
    own = {"count": f"batch * keySeq * {heads}", "keySeq": "keySeq"}
    return own | ({"seq": "seq"} if cfg.mode == "qkv" else table_field(cfg))


def dense_append_sizes(cfg: DenseAppendConfig) -> Sizes:
    """New BSH in (``keySeq`` tokens per batch), a dense cache of ``seq`` rows per head."""
    src = {"src_k": ("batch * keySeq", cfg.hidden), "src_v": ("batch * keySeq", cfg.hidden)}
    cache = dense_cache("batch * seq", cfg, cfg.kv_heads, PRESENT, "present_scales")
    return row_sources(cfg) | src | cache


CONTRACTS["dense_append"] = Contract(
    shape=("batch", "seq", "keySeq"),
    meanings={
        "count": "new rows",
        "keySeq": "new tokens per batch (rows of src_k/src_v per batch)",
        "seq": "the cache's capacity: rows per head of present_key/present_value",
    },
    sizes=dense_append_sizes,
    rows=lambda cfg: "keySeq",
)


def dense_build_sizes(cfg: DenseBuildConfig) -> Sizes:
    """New BSH in, a dense cache of the ``seq`` new tokens per head."""
    return row_sources(cfg) | dense_cache(
        "batch * seq", cfg, cfg.kv_heads, PRESENT, "present_scales"
    )


CONTRACTS["dense_build"] = Contract(
    shape=("batch", "seq", "pastSeq"),
    meanings={
        "count": "present rows",
        "seq": "new tokens per batch, also the present's rows per head",
        "pastSeq": "absolute position of token 0 (the rotary row; unused without rotary)",
    },
    sizes=dense_build_sizes,
)


def dense_read_sizes(cfg: DenseReadConfig) -> Sizes:
    """``rows`` dense (token, head) rows in, ``rows`` rows of ``head_dim`` values out."""
    cache = dense_cache("rows", cfg, 1, ("cache_key", "cache_value"), "cache_scales")
    return cache | {"key": ("rows", cfg.head_dim), "value": ("rows", cfg.head_dim)}


CONTRACTS["dense_read"] = Contract(
    shape=("rows",),
    meanings={
        "count": "rows of cache_key/cache_value to read back into key/value",
    },
    sizes=dense_read_sizes,
    params=count_only("rows"),
)


def qkv_sizes(cfg: QkvConfig) -> Sizes:
    """The packed projection in (``keySeq`` tokens per batch), Q out, a buffer-sharing cache of
    ``seq`` rows per head; the norm weights (Q's, then K's), one packed rotary row per
    position, the bias of every head."""
    return {
        "qkv": ("batch * keySeq", cfg.heads * cfg.head_dim),
        "seqlens_k": ("batch", 1),
        "qk_norm_weight": ("1", cfg.norm_weights),
        ROTARY_TABLE: ("positions", 2 * cfg.half),
        "qkv_bias": ("1", cfg.heads * cfg.head_dim),
        "q_out": ("batch * keySeq", cfg.q_heads * cfg.head_dim),
    } | (
        present("batch * seq", cfg.hidden)
        if cfg.format is None
        else dense_cache("batch * seq", cfg, cfg.kv_heads, PRESENT, "present_scales")
    )


CONTRACTS["qkv"] = Contract(
    shape=("batch", "seq", "keySeq"),
    meanings={
        "count": QKV_ROWS,
        "keySeq": "new tokens per batch (rows of qkv per batch)",
        "seq": "the cache's capacity: rows per head of present_key/present_value",
    },
    sizes=qkv_sizes,
    params=qkv_params,
)


def dense_move_sizes(cfg: DenseMoveConfig) -> Sizes:
    """A dense past and present of ``seq`` rows per head (their side scales too), and, where
    the pass appends, new BSH in (``keySeq`` tokens per batch)."""
    src = {"src_k": ("batch * keySeq", cfg.hidden), "src_v": ("batch * keySeq", cfg.hidden)}
    past = dense_cache("batch * seq", cfg, cfg.kv_heads, PAST, "past_scales")
    present = dense_cache("batch * seq", cfg, cfg.kv_heads, PRESENT, "present_scales")
    return {"seqlens_k": ("batch", 1)} | src | past | present


CONTRACTS["dense_retain"] = Contract(
    shape=("batch", "seq", "keySeq"),
    meanings={
        "count": "cache rows",
        "seq": "the cache's capacity: rows per head of past and present",
        "keySeq": "new tokens per batch (the append window dense_append fills)",
    },
    sizes=dense_move_sizes,
)


def dense_window_shift_sizes(cfg: DenseWindowShiftConfig) -> Sizes:
    """As :func:`dense_move_sizes`, and the rotary tables of the appended tokens' positions."""
    return dense_move_sizes(cfg) | rotary(cfg)


CONTRACTS["dense_window_shift"] = Contract(
    shape=("batch", "seq", "keySeq"),
    meanings={
        "count": "rows the pass owns: the window's (all, shift) or the new tokens' (append)",
        "seq": "the window's capacity: rows per head of past and present",
        "keySeq": "new tokens per batch (rows of src_k/src_v per batch)",
    },
    sizes=dense_window_shift_sizes,
    rows=region_rows,
)


def dense_convert_sizes(cfg: DenseConvertConfig) -> Sizes:
    """``rows`` (token, head) rows in (values, or a dense source's words and side scales),
    ``rows`` dense rows out."""
    src = cfg.source_fmt
    width = cfg.head_dim if src is None else src.row_words(cfg.head_dim, cfg.source_inline)
    out = {"src_k": ("rows", width), "src_v": ("rows", width)}
    if src is not None and not cfg.source_inline:
        out["src_scales"] = ("rows", 2 * src.stats)
    return out | dense_cache("rows", cfg, 1, PRESENT, "present_scales")


CONTRACTS["dense_convert"] = Contract(
    shape=("rows",),
    meanings={
        "count": "rows of src_k/src_v to copy into present_key/present_value",
    },
    sizes=dense_convert_sizes,
    params=count_only("rows"),
)


def _paged_append_params(cfg: PagedAppendConfig) -> dict[str, str | None]:
    return {"count": "batch * kv_heads * keySeq", "keySeq": "keySeq"} | table_field(cfg)


def _paged_read_params(cfg: PagedReadConfig) -> dict[str, str | None]:
    return {"count": "batch * kv_heads * seq", "seq": "seq"} | table_field(cfg)


def paged_append_sizes(cfg: PagedAppendConfig) -> Sizes:
    """New BSH in (``keySeq`` tokens per batch), through a page table of ``maxPages`` entries
    per sequence or a slot per token, into pools of ``pages`` pages."""
    tokens = "batch * keySeq"
    return (
        row_sources(cfg)
        | {"src_k": (tokens, cfg.hidden), "src_v": (tokens, cfg.hidden)}
        | {"page_table": ("batch * maxPages", 1), "slot_mapping": (tokens, 1)}
        | {"token_positions": (tokens, 1)}
        | pool_pages(cfg, "pages", POOLS, COMBINED_POOL, SCALE_POOL)
    )


CONTRACTS["paged_append"] = Contract(
    shape=("batch", "keySeq", "pages"),
    meanings={
        "count": "new rows",
        "keySeq": "new tokens per batch (rows of src_k/src_v per batch; with slot_mapping the tokens are batch × keySeq, one slot each)",
        "maxPages": TABLE_ENTRIES,
    },
    sizes=paged_append_sizes,
    params=_paged_append_params,
    rows=lambda cfg: "keySeq",
)


def paged_read_sizes(cfg: PagedReadConfig) -> Sizes:
    """Pools of ``pages`` pages in, ``seq`` rows per head of each of ``batch`` sequences out."""
    rows = "batch * seq"
    return (
        {"seqlens_k": ("batch", 1), "page_table": ("batch * maxPages", 1)}
        | {"slot_mapping": (rows, 1), "key": (rows, cfg.hidden), "value": (rows, cfg.hidden)}
        | pool_pages(cfg, "pages", POOLS, COMBINED_POOL, SCALE_POOL)
    )


CONTRACTS["paged_read"] = Contract(
    shape=("batch", "seq", "pages"),
    meanings={
        "count": "rows to gather",
        "seq": "positions 0 .. seq-1 gathered per sequence (page_table: rows per head of the BNSH key/value); with slot_mapping, tokens per batch",
        "maxPages": TABLE_ENTRIES,
    },
    sizes=paged_read_sizes,
    params=_paged_read_params,
)


def paged_copy_sizes(cfg: PagedCopyConfig) -> Sizes:
    """``copies`` (src, dst) pairs, pools of ``pages`` pages."""
    return {"page_pairs": ("copies", 2)} | pool_pages(
        cfg, "pages", POOLS, COMBINED_POOL, SCALE_POOL
    )


CONTRACTS["paged_copy"] = Contract(
    shape=("pages", "copies"),
    meanings={
        "count": "page copies: (src, dst) pairs of page_pairs",
    },
    sizes=paged_copy_sizes,
    params=count_only("copies"),
)


def paged_compact_sizes(cfg: PagedCompactConfig) -> Sizes:
    """``live`` page ids, pools of ``pages`` pages in, pools of ``live`` pages out."""
    return (
        {"live_pages": ("live", 1)}
        | pool_pages(cfg, "pages", POOLS, COMBINED_POOL, SCALE_POOL)
        | pool_pages(cfg, "live", COMPACT_POOLS, COMPACT_COMBINED, COMPACT_SCALES)
    )


CONTRACTS["paged_compact"] = Contract(
    shape=("pages", "live"),
    meanings={
        "count": "entries of live_pages: pages of the compacted pools",
    },
    sizes=paged_compact_sizes,
    params=count_only("live"),
)


def paged_window_sizes(cfg: PagedWindowConfig) -> Sizes:
    """``seqlens_k`` per sequence, page tables of ``maxPages`` entries per sequence."""
    table = ("batch * maxPages", 1)
    return {"seqlens_k": ("batch", 1), "page_table": table, "freed_pages": table}


CONTRACTS["paged_window"] = Contract(
    shape=("batch", "maxPages", "window"),
    meanings={
        "count": "page-table entries",
        "maxPages": TABLE_ENTRIES,
        "window": "tokens the window keeps per sequence (its last ones)",
    },
    sizes=paged_window_sizes,
    params=lambda cfg: {"count": "batch * maxPages", "maxPages": "maxPages", "window": "window"},
)


def paged_qkv_sizes(cfg: PagedQkvConfig) -> Sizes:
    """``qkv``'s packed projection, tables and Q (:func:`qkv_sizes`), addressed as
    ``paged_append`` is (a page table of ``maxPages`` entries per sequence, or a slot and a
    position per token) into pools of ``pages`` pages."""
    tokens = "batch * keySeq"
    own = {k: v for k, v in qkv_sizes(cfg).items() if k not in ("present_key", "present_value")}
    return (
        own
        | {"page_table": ("batch * maxPages", 1), "slot_mapping": (tokens, 1)}
        | {"token_positions": (tokens, 1)}
        | pool_pages(cfg.pool_config, "pages", POOLS, COMBINED_POOL, SCALE_POOL)
    )


CONTRACTS["paged_qkv"] = Contract(
    shape=("batch", "keySeq", "pages"),
    meanings={
        "count": QKV_ROWS,
        "keySeq": "new tokens per batch (rows of qkv per batch; with slot_mapping the tokens are batch × keySeq, one slot each)",
        "maxPages": TABLE_ENTRIES,
    },
    sizes=paged_qkv_sizes,
    params=qkv_params,
)
