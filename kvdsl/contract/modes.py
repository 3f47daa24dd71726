"""Per mode, once: the shape variables a host sizes buffers with, each binding's size in them, and
what each params field means.

A binding's size is ``(rows, width)``: ``rows`` an expression of the shape variables
(:mod:`kvdsl.contract.expr`) and ``width`` the host values per row (f32, f16, i32 or u32 numbers
of the host's array; a packed int4 cache row is ``head_dim / 2`` u32 words). The element count
of the binding's WGSL array is ``rows * width / values per element``
(:func:`kvdsl.contract.index.bindings`). The shape variables are the keys of the verification
cases' ``Case.shape`` (:mod:`kvdsl.harness.cases`, :mod:`kvdsl.harness.modes`); a test holds the
two to each other.
"""

from __future__ import annotations

import re
from typing import Callable


from kvdsl.contract import attend, kivi
from kvdsl.kernels.build import BuildConfig
from kvdsl.kernels.rows import RowConfig
from kvdsl.kernels.config import (
    KV_SCALE,
    PAST,
    PRESENT,
    ROTARY_TABLE,
    KernelConfig,
    rotary_pairs,
    window_bindings,
)
from kvdsl.kernels.copy import CopyConfig
from kvdsl.kernels.dense import DenseAppendConfig, DenseBuildConfig, DenseConfig, DenseReadConfig
from kvdsl.kernels.dense_convert import DenseConvertConfig
from kvdsl.kernels.dense_modes import DenseMoveConfig, DenseWindowShiftConfig
from kvdsl.kernels.merge import MergeConfig
from kvdsl.kernels.merge_share import MergeShareConfig
from kvdsl.kernels.paged import COMBINED_POOL, POOLS, SCALE_POOL, PagedAppendConfig
from kvdsl.kernels.paged import PagedConfig, PagedReadConfig
from kvdsl.kernels.paged_pages import COMPACT_COMBINED, COMPACT_POOLS, COMPACT_SCALES
from kvdsl.kernels.paged_pages import PagedCompactConfig
from kvdsl.kernels.paged_pages import PagedCopyConfig, PagedWindowConfig
from kvdsl.kernels.qkv import QkvConfig
from kvdsl.kernels.qkv_paged import PagedQkvConfig
from kvdsl.kernels.quant import AppendQuantConfig, BuildQuantConfig, QuantConfig
from kvdsl.kernels.transpose import TransposeConfig
from kvdsl.kernels.window_shift import WindowShiftConfig

#: binding name → (rows, host values per row)
Sizes = dict[str, tuple[str, int]]

#: mode → its shape variables (``positions``, the rotary table's rows, is added where a kernel
#: binds ``cos_cache`` or the packed ``rotary_table``)
SHAPES: dict[str, tuple[str, ...]] = {
    "transpose": ("batch", "kvSeq"),
    "copy": ("rows",),
    "merge": ("batch", "pastSeq", "keySeq"),
    "merge_share": ("batch", "seq", "keySeq"),
    "window_shift": ("batch", "seq", "keySeq"),
    "build": ("batch", "seq", "pastSeq"),
    "build_quant": ("batch", "seq", "pastSeq", "perChannel"),
    "append_quant": ("batch", "seq", "totalSeq", "perChannel"),
    "dense_append": ("batch", "seq", "keySeq"),
    "dense_build": ("batch", "seq", "pastSeq"),
    "dense_read": ("rows",),
    "qkv": ("batch", "seq", "keySeq"),
    "dense_retain": ("batch", "seq", "keySeq"),
    "dense_window_shift": ("batch", "seq", "keySeq"),
    "dense_convert": ("rows",),
    "paged_append": ("batch", "keySeq", "pages"),
    "paged_read": ("batch", "seq", "pages"),
    "paged_copy": ("pages", "copies"),
    "paged_compact": ("pages", "live"),
    "paged_window": ("batch", "maxPages", "window"),
    "paged_qkv": ("batch", "keySeq", "pages"),
}

#: The shape variables a windowed variant (``window=True``) adds, after the mode's: the window's
#: first slice, its slices, and the first batch of its bound BSH source range. Its ``batch`` is
#: the batches up to the window's last (``seqlens_k``'s rows; the sources hold batches
#: ``[batchBase, batch)``).
WINDOW_SHAPE = ("headBase", "slices", "batchBase")
#: The params a windowed variant adds (``count`` only where the mode has none: ``transpose``).
WINDOW_MEANINGS = {
    "count": "the window's rows",
    "headBase": "the window's first (batch, kv head) slice: where the bound cache ranges start",
    "batchBase": "the first batch of the bound BSH source ranges (0 when bound whole)",
}

_PER_CHANNEL = (
    "1: k_scale and v_scale (packed: kv_scale's (k, v) pairs) hold one scale per channel "
    "(kv_heads × head_dim); 0: one scale each"
)
_TABLE = "entries of each sequence's row of page_table"

#: mode → params field → its meaning in words; where a field's value (:func:`values`) is a
#: formula of the shape variables, :func:`meanings` adds it after a colon
MEANINGS: dict[str, dict[str, str]] = {
    "transpose": {
        "batchSize": "batches in key/value (BSH) and present_key/present_value (BNSH)",
        "kvSeq": "tokens per batch",
    },
    "copy": {"count": "rows of head_dim values to copy from src to present"},
    "merge": {
        "count": "present rows",
        "seq": "present tokens per head",
        "pastSeq": "past tokens per head (rows of past_k/past_v per head)",
        "keySeq": "new tokens per batch (rows of new_k/new_v per batch)",
    },
    "merge_share": {
        "count": "rows the pass owns: the cache's (retain) or the new tokens' (append)",
        "seq": "the cache's capacity: rows per head of past and present",
        "keySeq": "new tokens per batch (rows of new_k/new_v per batch)",
    },
    "window_shift": {
        "count": "rows the pass owns: the window's (all, shift) or the new tokens' (append)",
        "seq": "the window's capacity: rows per head of past and present",
        "keySeq": "new tokens per batch (rows of new_k/new_v per batch)",
    },
    "build": {
        "count": "present rows",
        "seq": "new tokens per batch, also the present's rows per head",
        "pastSeq": "absolute position of token 0 (the rotary row; unused without rotary)",
    },
    "build_quant": {
        "count": "present rows",
        "seq": "new tokens per batch, also the present's rows per head",
        "pastSeq": "absolute position of token 0 (the rotary row; unused without rotary)",
        "perChannel": _PER_CHANNEL,
    },
    "append_quant": {
        "count": "new rows",
        "seq": "new tokens per batch (rows of src_k/src_v per batch)",
        "pastSeq": "rotary position of token 0 when rotary_position is past_seq; else unused (0)",
        "totalSeq": "the cache's capacity: rows per head of present_key/present_value",
        "perChannel": _PER_CHANNEL,
    },
    "dense_append": {
        "count": "new rows",
        "keySeq": "new tokens per batch (rows of src_k/src_v per batch)",
        "seq": "the cache's capacity: rows per head of present_key/present_value",
    },
    "dense_build": {
        "count": "present rows",
        "seq": "new tokens per batch, also the present's rows per head",
        "pastSeq": "absolute position of token 0 (the rotary row; unused without rotary)",
    },
    "dense_read": {"count": "rows of cache_key/cache_value to read back into key/value"},
    "qkv": {
        "count": "rows: every head of every new token (with a dense format not split, a K head"
        " and its V head are one row)",
        "keySeq": "new tokens per batch (rows of qkv per batch)",
        "seq": "the cache's capacity: rows per head of present_key/present_value",
    },
    "dense_retain": {
        "count": "cache rows",
        "seq": "the cache's capacity: rows per head of past and present",
        "keySeq": "new tokens per batch (the append window dense_append fills)",
    },
    "dense_window_shift": {
        "count": "rows the pass owns: the window's (all, shift) or the new tokens' (append)",
        "seq": "the window's capacity: rows per head of past and present",
        "keySeq": "new tokens per batch (rows of src_k/src_v per batch)",
    },
    "dense_convert": {"count": "rows of src_k/src_v to copy into present_key/present_value"},
    "paged_append": {
        "count": "new rows",
        "keySeq": "new tokens per batch (rows of src_k/src_v per batch; with slot_mapping the"
        " tokens are batch × keySeq, one slot each)",
        "maxPages": _TABLE,
    },
    "paged_read": {
        "count": "rows to gather",
        "seq": "positions 0 .. seq-1 gathered per sequence (page_table: rows per head of the"
        " BNSH key/value); with slot_mapping, tokens per batch",
        "maxPages": _TABLE,
    },
    "paged_copy": {"count": "page copies: (src, dst) pairs of page_pairs"},
    "paged_compact": {"count": "entries of live_pages: pages of the compacted pools"},
    "paged_qkv": {
        "count": "rows: every head of every new token (with a dense format not split, a K head"
        " and its V head are one row)",
        "keySeq": "new tokens per batch (rows of qkv per batch; with slot_mapping the tokens"
        " are batch × keySeq, one slot each)",
        "maxPages": _TABLE,
    },
    "paged_window": {
        "count": "page-table entries",
        "maxPages": _TABLE,
        "window": "tokens the window keeps per sequence (its last ones)",
    },
}

#: The modes whose contract is a module of its own (its MODES, SHAPES, MEANINGS, shape, formulas, sizes
#: and says), by mode.
FAMILIES = (attend, kivi)
FAMILY = {mode: f for f in FAMILIES for mode in f.MODES}
for _f in FAMILIES:
    SHAPES |= _f.SHAPES
    MEANINGS |= _f.MEANINGS

#: The config fields a value formula (:func:`formulas`) may name; :func:`values` puts in the
#: variant's numbers.
CONSTANTS = ("kv_heads", "q_heads")


def _rows_per_head(cfg: KernelConfig) -> str:
    """The rows per (batch, kv head) a pass of ``cfg``'s mode owns, as a formula."""
    region = getattr(getattr(cfg, "region", None), "value", None)
    match cfg.mode:
        case "merge":
            return "(pastSeq + keySeq)"
        case "merge_share" | "window_shift" | "dense_window_shift":
            return "keySeq" if region == "append" else "seq"
        case "dense_append" | "paged_append":
            return "keySeq"
    return "seq"


def formulas(cfg: KernelConfig) -> dict[str, str | None]:
    """Each params field of ``cfg``'s variant as a formula of the shape variables and
    :data:`CONSTANTS` (None: a value the host chooses, with no formula: ``append_quant``'s
    ``pastSeq`` with ``rotary_position="past_seq"``). ``tests/contract`` holds every formula to
    the kernel's extents and to the verification cases' params."""
    if cfg.mode in FAMILY:
        return FAMILY[cfg.mode].formulas(cfg)
    mode, rows = cfg.mode, _rows_per_head(cfg)
    heads = "(q_heads + 2 * kv_heads)"
    if getattr(cfg, "format", None) is not None and not getattr(cfg, "split", True):
        heads = "(q_heads + kv_heads)"  # a K head and its V head are one row
    addressing = getattr(getattr(cfg, "addressing", None), "value", None)
    table = {"maxPages": "maxPages"} if addressing == "page_table" else {}
    own: dict[str, str | None] = {}
    match mode:
        case "transpose":
            own = {"batchSize": "batch", "kvSeq": "kvSeq"}
        case "copy" | "dense_read" | "dense_convert":
            own = {"count": "rows"}
        case "paged_copy":
            own = {"count": "copies"}
        case "paged_compact":
            own = {"count": "live"}
        case "paged_window":
            own = {"count": "batch * maxPages", "maxPages": "maxPages", "window": "window"}
        case "qkv" | "paged_qkv":
            own = {"count": f"batch * keySeq * {heads}", "keySeq": "keySeq"}
            own |= {"seq": "seq"} if mode == "qkv" else table
        case "paged_append":
            own = {"count": f"batch * kv_heads * {rows}", "keySeq": "keySeq"} | table
        case "paged_read":
            own = {"count": f"batch * kv_heads * {rows}", "seq": "seq"} | table
        case "merge":
            own = {"count": f"batch * kv_heads * {rows}", "seq": "pastSeq + keySeq"}
            own |= {"pastSeq": "pastSeq", "keySeq": "keySeq"}
        case "append_quant":
            past = "0" if cfg.rotary_position.value == "row" else None
            own = {"count": f"batch * kv_heads * {rows}", "seq": "seq", "pastSeq": past}
            own |= {"totalSeq": "totalSeq", "perChannel": "perChannel"}
        case _:
            own = {"count": f"batch * kv_heads * {rows}"}
            own |= {k: k for k in MEANINGS[mode] if k != "count"}
    if not cfg.window:
        return own
    per = "kvSeq" if mode == "transpose" else rows
    return own | {"count": f"slices * {per}", "headBase": "headBase", "batchBase": "batchBase"}


def values(cfg: KernelConfig) -> dict[str, str | None]:
    """Each params field's value for a shape: :func:`formulas` with the variant's
    :data:`CONSTANTS` put in (the contract's expression language over shape variables)."""
    numbers = {k: str(getattr(cfg, k)) for k in CONSTANTS if hasattr(cfg, k)}

    def put(formula: str) -> str:
        return re.sub(r"[A-Za-z_][A-Za-z0-9_]*", lambda m: numbers.get(m[0], m[0]), formula)

    return {k: None if f is None else put(f) for k, f in formulas(cfg).items()}


def shape(cfg: KernelConfig, bindings: list[str]) -> list[str]:
    """The shape variables of ``cfg``'s variant, whose kernel has ``bindings``."""
    rotary = ["positions"] if {"cos_cache", ROTARY_TABLE} & set(bindings) else []
    own = FAMILY[cfg.mode].shape(cfg) if cfg.mode in FAMILY else list(SHAPES[cfg.mode])
    table = ["maxPages"] if "page_table" in bindings and "maxPages" not in own else []
    return own + table + rotary + (list(WINDOW_SHAPE) if cfg.window else [])


def meanings(cfg: KernelConfig) -> dict[str, str]:
    """What each params field of ``cfg``'s variant means (a windowed one's base params too),
    with its formula (:func:`formulas`, ``×`` for ``*``) where it is more than a shape
    variable's name."""
    own = attend.meanings(cfg) if cfg.mode in attend.MODES else MEANINGS[cfg.mode]
    if cfg.window:  # a window's count is the window's rows
        own = own | {k: v for k, v in WINDOW_MEANINGS.items() if k not in own or k == "count"}
    table, out = formulas(cfg), {}
    for field, words in own.items():
        formula = table.get(field)
        if formula is not None and " " in formula:  # more than one name or number
            words = f"{words}: {formula.replace(' * ', ' × ')}"
        out[field] = words
    return out


def sizes(cfg: KernelConfig) -> Sizes:
    """The sizes of the bindings of ``cfg``'s variant: the mode's, or a window's.

    A windowed variant binds the cache's ``slices`` slices (rows of ``head_dim`` values per
    head instead of ``hidden`` per token) and the sources' batches ``[batchBase, batch)``.
    """
    table = SIZES[cfg.mode](cfg)
    if not cfg.window:
        return table
    cache, sources = window_bindings(cfg.mode)
    out = dict(table)
    for name, (rows, width) in table.items():
        if name not in cache and name not in sources:
            continue
        per = rows.removeprefix("batch * ")  # every cache and source row is per batch
        if name in cache:
            out[name] = (f"slices * {per}", width // cfg.kv_heads)
        else:
            out[name] = (f"(batch - batchBase) * {per}", width)
    return out


def _present(rows: str, width: int) -> Sizes:
    return {"present_key": (rows, width), "present_value": (rows, width)}


def _rotary(
    cfg: (
        RowConfig
        | MergeShareConfig
        | WindowShiftConfig
        | DenseAppendConfig
        | DenseWindowShiftConfig
    ),
) -> Sizes:
    """cos_cache and sin_cache: the config's rotated pairs per row (``half``: ``rotary_half``, or
    ``head_dim / 2`` where it is unset) f32 per position; the packed ``rotary_table``
    (:class:`~kvdsl.kernels.config.Bindings`): both, ``2 * half`` f32 per position (its ``half``
    cos values, then its ``half`` sin values)."""
    half = rotary_pairs(cfg.head_dim, cfg.rotary_half)
    return {
        "cos_cache": ("positions", half),
        "sin_cache": ("positions", half),
        ROTARY_TABLE: ("positions", 2 * half),
    }


def _row(cfg: RowConfig) -> Sizes:
    """The bindings a row mode (build, build_quant, append_quant) may have but the present."""
    scales = f"perChannel * {cfg.hidden - 1} + 1"  # one scale per channel, or one
    return {
        "src_k": ("batch * seq", cfg.hidden),
        "src_v": ("batch * seq", cfg.hidden),
        "seqlens_k": ("batch", 1),
        "k_norm_weight": ("1", cfg.head_dim),
        "k_scale": (scales, 1),
        "v_scale": (scales, 1),
        KV_SCALE: (scales, 2),  # packed: (k, v) per entry
    } | _rotary(cfg)


def _quant_row(cfg: QuantConfig) -> int:
    """Stored words per token of a quantised cache (all heads)."""
    return cfg.kv_heads * cfg.packed


def transpose_sizes(cfg: TransposeConfig) -> Sizes:
    """BSH key/value in, BNSH present out: a token's ``hidden`` values each."""
    rows = "batch * kvSeq"
    return {"key": (rows, cfg.hidden), "value": (rows, cfg.hidden)} | _present(rows, cfg.hidden)


def copy_sizes(cfg: CopyConfig) -> Sizes:
    """``rows`` rows of ``head_dim`` values in and out."""
    src = {"src_k": ("rows", cfg.head_dim), "src_v": ("rows", cfg.head_dim)}
    return src | _present("rows", cfg.head_dim)


def merge_sizes(cfg: MergeConfig) -> Sizes:
    """Past BNSH and new BSH in, present BNSH of ``pastSeq + keySeq`` tokens out."""
    return {
        "past_k": ("batch * pastSeq", cfg.hidden),
        "past_v": ("batch * pastSeq", cfg.hidden),
        "new_k": ("batch * keySeq", cfg.hidden),
        "new_v": ("batch * keySeq", cfg.hidden),
    } | _present("batch * (pastSeq + keySeq)", cfg.hidden)


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
        | _rotary(cfg)
        | _present("batch * seq", cfg.hidden)
    )


def build_sizes(cfg: BuildConfig) -> Sizes:
    """New BSH in, a BNSH present of ``seq`` tokens out."""
    return _row(cfg) | _present("batch * seq", cfg.hidden)


def build_quant_sizes(cfg: BuildQuantConfig) -> Sizes:
    """As :func:`build_sizes`, the present in quantised words."""
    return _row(cfg) | _present("batch * seq", _quant_row(cfg))


def append_quant_sizes(cfg: AppendQuantConfig) -> Sizes:
    """New BSH in, a quantised present of ``totalSeq`` rows per head."""
    return _row(cfg) | _present("batch * totalSeq", _quant_row(cfg))


def _dense(rows: str, cfg: DenseConfig, heads: int, cache: tuple[str, ...], scales: str) -> Sizes:
    """A dense cache of ``rows`` rows of ``heads`` heads: ``ROW_WORDS`` u32 words per (token,
    head) and, with side scales, the ``scales`` binding's ``2 * stats`` f32 per (token, head),
    K's then V's."""
    fmt = cfg.fmt
    out = {name: (rows, heads * fmt.row_words(cfg.head_dim, cfg.inline)) for name in cache}
    if not cfg.inline:
        out[scales] = (rows, heads * 2 * fmt.stats)
    return out


def dense_append_sizes(cfg: DenseAppendConfig) -> Sizes:
    """New BSH in (``keySeq`` tokens per batch), a dense cache of ``seq`` rows per head."""
    src = {"src_k": ("batch * keySeq", cfg.hidden), "src_v": ("batch * keySeq", cfg.hidden)}
    present = _dense("batch * seq", cfg, cfg.kv_heads, PRESENT, "present_scales")
    return _row(cfg) | src | present


def dense_build_sizes(cfg: DenseBuildConfig) -> Sizes:
    """New BSH in, a dense cache of the ``seq`` new tokens per head."""
    return _row(cfg) | _dense("batch * seq", cfg, cfg.kv_heads, PRESENT, "present_scales")


def dense_read_sizes(cfg: DenseReadConfig) -> Sizes:
    """``rows`` dense (token, head) rows in, ``rows`` rows of ``head_dim`` values out."""
    cache = _dense("rows", cfg, 1, ("cache_key", "cache_value"), "cache_scales")
    return cache | {"key": ("rows", cfg.head_dim), "value": ("rows", cfg.head_dim)}


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
        _present("batch * seq", cfg.hidden)
        if cfg.format is None
        else _dense("batch * seq", cfg, cfg.kv_heads, PRESENT, "present_scales")
    )


def dense_move_sizes(cfg: DenseMoveConfig) -> Sizes:
    """A dense past and present of ``seq`` rows per head (their side scales too), and, where
    the pass appends, new BSH in (``keySeq`` tokens per batch)."""
    src = {"src_k": ("batch * keySeq", cfg.hidden), "src_v": ("batch * keySeq", cfg.hidden)}
    past = _dense("batch * seq", cfg, cfg.kv_heads, PAST, "past_scales")
    present = _dense("batch * seq", cfg, cfg.kv_heads, PRESENT, "present_scales")
    return {"seqlens_k": ("batch", 1)} | src | past | present


def dense_window_shift_sizes(cfg: DenseWindowShiftConfig) -> Sizes:
    """As :func:`dense_move_sizes`, and the rotary tables of the appended tokens' positions."""
    return dense_move_sizes(cfg) | _rotary(cfg)


def dense_convert_sizes(cfg: DenseConvertConfig) -> Sizes:
    """``rows`` (token, head) rows in (values, or a dense source's words and side scales),
    ``rows`` dense rows out."""
    src = cfg.source_fmt
    width = cfg.head_dim if src is None else src.row_words(cfg.head_dim, cfg.source_inline)
    out = {"src_k": ("rows", width), "src_v": ("rows", width)}
    if src is not None and not cfg.source_inline:
        out["src_scales"] = ("rows", 2 * src.stats)
    return out | _dense("rows", cfg, 1, PRESENT, "present_scales")


def _pools(
    cfg: PagedConfig, rows: str, names: tuple[str, str], combined: str, scales: str
) -> Sizes:
    """A paged pool's bindings: ``rows`` pages of ``page_values`` host values (K's, V's or, in
    a combined pool, both) and, with side scales, of the scale pages' f32."""
    out = {name: (rows, cfg.page_values) for name in (*names, combined)}
    sides = cfg.scale_geometry
    return out | ({} if sides is None else {scales: (rows, sides.stride)})


def paged_append_sizes(cfg: PagedAppendConfig) -> Sizes:
    """New BSH in (``keySeq`` tokens per batch), through a page table of ``maxPages`` entries
    per sequence or a slot per token, into pools of ``pages`` pages."""
    tokens = "batch * keySeq"
    return (
        _row(cfg)
        | {"src_k": (tokens, cfg.hidden), "src_v": (tokens, cfg.hidden)}
        | {"page_table": ("batch * maxPages", 1), "slot_mapping": (tokens, 1)}
        | {"token_positions": (tokens, 1)}
        | _pools(cfg, "pages", POOLS, COMBINED_POOL, SCALE_POOL)
    )


def paged_read_sizes(cfg: PagedReadConfig) -> Sizes:
    """Pools of ``pages`` pages in, ``seq`` rows per head of each of ``batch`` sequences out."""
    rows = "batch * seq"
    return (
        {"seqlens_k": ("batch", 1), "page_table": ("batch * maxPages", 1)}
        | {"slot_mapping": (rows, 1), "key": (rows, cfg.hidden), "value": (rows, cfg.hidden)}
        | _pools(cfg, "pages", POOLS, COMBINED_POOL, SCALE_POOL)
    )


def paged_copy_sizes(cfg: PagedCopyConfig) -> Sizes:
    """``copies`` (src, dst) pairs, pools of ``pages`` pages."""
    return {"page_pairs": ("copies", 2)} | _pools(cfg, "pages", POOLS, COMBINED_POOL, SCALE_POOL)


def paged_compact_sizes(cfg: PagedCompactConfig) -> Sizes:
    """``live`` page ids, pools of ``pages`` pages in, pools of ``live`` pages out."""
    return (
        {"live_pages": ("live", 1)}
        | _pools(cfg, "pages", POOLS, COMBINED_POOL, SCALE_POOL)
        | _pools(cfg, "live", COMPACT_POOLS, COMPACT_COMBINED, COMPACT_SCALES)
    )


def paged_window_sizes(cfg: PagedWindowConfig) -> Sizes:
    """``seqlens_k`` per sequence, page tables of ``maxPages`` entries per sequence."""
    table = ("batch * maxPages", 1)
    return {"seqlens_k": ("batch", 1), "page_table": table, "freed_pages": table}


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
        | _pools(cfg.pool_config, "pages", POOLS, COMBINED_POOL, SCALE_POOL)
    )


#: mode → the sizes of its bindings for a config (a binding a variant lacks is ignored)
SIZES: dict[str, Callable[..., Sizes]] = {
    "transpose": transpose_sizes,
    "copy": copy_sizes,
    "merge": merge_sizes,
    "merge_share": window_sizes,
    "window_shift": window_sizes,
    "build": build_sizes,
    "build_quant": build_quant_sizes,
    "append_quant": append_quant_sizes,
    "dense_append": dense_append_sizes,
    "dense_build": dense_build_sizes,
    "dense_read": dense_read_sizes,
    "qkv": qkv_sizes,
    "dense_retain": dense_move_sizes,
    "dense_window_shift": dense_window_shift_sizes,
    "dense_convert": dense_convert_sizes,
    "paged_append": paged_append_sizes,
    "paged_read": paged_read_sizes,
    "paged_copy": paged_copy_sizes,
    "paged_compact": paged_compact_sizes,
    "paged_window": paged_window_sizes,
    "paged_qkv": paged_qkv_sizes,
}
SIZES |= {mode: f.sizes for mode, f in FAMILY.items()}
