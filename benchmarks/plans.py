"""What the GPU benchmark (``benchmarks/gpu.py``) measures: which configs, at which sizes, and
the bytes each measurement must move.

**What runs.** One representative config per distinct option set of the catalog (mode, walk,
region, rotary, K norm, bits, vec4, element types ...), reshaped to 8 KV heads × head dim 128 with
``dataclasses.replace`` (``copy`` of packed int4 words: 64 words per row). Sizes: batch 1 and 4,
an 8,192-token cache, prefill appends of 2,048 tokens and decode appends of 1 token (``--small``:
a 32-token cache, 8-token appends, batch 1 and 2, for llvmpipe):

=============  ==================================================================================
transpose      ``kvSeq`` = cache
copy           rows = batch × heads × cache
merge          ``pastSeq`` + ``keySeq`` = cache − prefill + prefill, and cache − 1 + 1
merge_share    capacity = cache, ``keySeq`` = prefill and 1, ``seqlens_k`` = cache − 1 (the append
               fills the cache: rows ``[cache − keySeq, cache)``)
window_shift   capacity = cache, ``keySeq`` = prefill and 1, ``seqlens_k`` = cache + keySeq − 1 (a
               full cache: ``keySeq`` rows are evicted, the rest slide down)
build(_quant)  ``seq`` = prefill and cache, ``pastSeq`` = 0, per-channel scales
append_quant   ``totalSeq`` = cache, ``seq`` = prefill and 1, ``seqlens_k`` = cache − 1
dense_append   ``seq`` = cache, ``keySeq`` = prefill and 1, ``seqlens_k`` = cache − 1
dense_build    ``seq`` = prefill and cache, ``pastSeq`` = 0
dense_read     rows = batch × heads × cache
qkv            capacity = cache, ``keySeq`` = prefill and 1, ``seqlens_k`` = cache − 1; each
               variant at its own model's heads and head dim (its query heads are its own)
dense_retain   capacity = cache, ``keySeq`` = prefill and 1, ``seqlens_k`` = cache − 1
dense_convert  rows = batch × heads × cache
paged_append   pages of ``page_size`` tokens, ``cache / page_size`` per sequence, page ids shuffled
               over the pool; ``keySeq`` = prefill and 1 at the end of a ``cache``-token sequence
               (``seqlens_k`` = cache − 1; a slot mapping holds the same slots)
paged_read     every position of each ``cache``-token sequence gathered
paged_copy     the prefill's pages of each sequence copied (copy-on-write of a fork)
paged_compact  every other page of the pool gathered into a dense prefix
paged_window   the page table of ``cache``-token sequences slid to a window of half of them
=============  ==================================================================================

``dense_window_shift`` takes window_shift's sizes.

**Bytes that must move** (each input element the kernel's interface needs read once, each output
element it must write written once; element = a word of the binding's type, so an int8 cache
element is an i32 word (4 B) and two int4 elements share a u32 word (2 B per element)):

- transpose, copy: all of K and V in, all of present K and V out.
- merge: past rows (``pastSeq`` per head) and new rows (``keySeq``) in; every present row out.
- merge_share retain: the rows outside the append window, in and out (the window is the other
  pass's); ``seqlens_k`` in. append: the window's new rows in and out, ``seqlens_k``, and with
  rotary the cos/sin entries of the window's positions.
- window_shift all: the surviving past rows and the new rows in, every capacity row out (cleared
  rows count as written); shift: surviving past rows in, every row but the appended ones out;
  append: new rows in and out, cos/sin of their positions. ``seqlens_k`` in.
- build, build_quant: new K/V in, present K/V out (quantised words); K-norm weight; cos/sin of
  the ``seq`` positions; per-channel scales (heads × head dim each).
- append_quant: as build_quant for the fitting new rows, plus ``seqlens_k``.
- dense_append: the new rows in; their packed cache words (and side scales) out,
  ``bytes_per_token_head`` per row of K and of V; ``seqlens_k``; the K-norm weight; with rotary
  the cos/sin entries of the window's positions.
- dense_build: as dense_append, every present row written.
- dense_read: every cache row's words (and side scales) in, every f32 row out.
- qkv: the packed projection in, Q out, the new K and V rows out (the window's), ``seqlens_k``,
  the norm weights, the bias and the rotary rows of the window's positions: index.json's
  ``bytes_moved``. Its unfused chain (:func:`chain_plans`) is timed beside it, each kernel of
  the chain once over every batch (the batches' positions are equal at the measured step).
- dense_retain: as merge_share retain, a row's words and side scales.
- dense_window_shift: as window_shift, a row's words and side scales; the appended rows'
  new K/V in, their words out.
- dense_convert: every source row (values, or words and side scales) in, every dense row out.
- paged_append: the new rows in; their rows of the pages out (values, or a dense format's words
  and side scales); ``seqlens_k`` and the page-table entries of the pages written, or one slot
  (and rotary position) per new token; cos/sin of the new positions.
- paged_read: every row of the sequences' pages in, every output row out, the table and
  ``seqlens_k`` (or the slots).
- paged_copy, paged_compact: each moved page in and out (K and V, side scales), its ids.
- paged_window: ``seqlens_k``, the page table in and out, ``freed_pages`` out; no K/V byte.

:func:`contiguous` names the contiguous append of a paged append's format (``merge_share``'s
append for f32 and f16, ``dense_append`` for a dense format) that ``gpu.py`` times beside it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterator

import numpy as np

import roofline
from kvdsl import catalog
from kvdsl.cli.inputs import UsageError
from kvdsl.ir import Kernel
from kvdsl.kernels.config import ConfigError
from kvdsl.reference import formats

HEADS, HEAD_DIM = 8, 128
FULL = {"batches": (1, 4), "cache": 8192, "prefill": 2048}
SMALL = {"batches": (1, 2), "cache": 32, "prefill": 8}
#: config fields that do not make a variant distinct (its shape and dispatch tunables)
SHAPE_FIELDS = ("kv_heads", "head_dim", "workgroup_size", "fold", "eps")
#: fields a ``--variants VARIANT@field=N`` spec may change (:func:`tuned`)
TUNABLES = ("workgroup_size", "fold", "walk", "split", "run", "pair_loads", "q_strided")


# -- which configs ------------------------------------------------------------------------------


def options(cfg: Any) -> str:
    """The fields that make ``cfg`` distinct, as ``k=v`` words (shape fields left out)."""
    fields = dataclasses.asdict(cfg)
    return " ".join(f"{k}={v}" for k, v in fields.items() if k not in SHAPE_FIELDS)


def reshape(cfg: Any) -> Any:
    """``cfg`` at 8 KV heads × head dim 128 (``copy``: words per row, 64 for packed int4;
    ``qkv`` and the attention modes: as it is, its model's own query and KV heads)."""
    if cfg.mode in ("qkv", "paged_qkv", "attend", "attend_merge"):
        return cfg
    if cfg.mode == "copy":
        return dataclasses.replace(
            cfg, head_dim=HEAD_DIM // 2 if cfg.present_type == "u32" else 128
        )
    if cfg.mode == "paged_window":  # a page-table update: no head shape
        return cfg
    return dataclasses.replace(cfg, kv_heads=HEADS, head_dim=HEAD_DIM)


def representatives(select: list[str] | None = None) -> dict[str, Any]:
    """One catalog config per distinct (mode, options), reshaped; named after its catalog variant
    (one of 8 × 128 shape where there is one). ``select``: variant or mode names."""
    groups: dict[tuple[str, str], list[str]] = {}
    for name, cfg in catalog.VARIANTS.items():
        if cfg.window:  # the flat program over a window: benchmarks/big_cache.py runs those
            continue
        groups.setdefault((cfg.mode, options(cfg)), []).append(name)
    chosen = {}
    for names in groups.values():
        native = [n for n in names if n.endswith(("llama31_8b", "qwen3_06b"))]
        chosen[(native or names)[0]] = reshape(catalog.VARIANTS[(native or names)[0]])
    order = list(catalog.MODES)
    chosen = dict(sorted(chosen.items(), key=lambda kv: (order.index(kv[1].mode), kv[0])))
    if not select:
        return chosen
    out = {}
    for s in select:
        if s in catalog.MODES:
            out |= {n: c for n, c in chosen.items() if c.mode == s}
        elif s in chosen:
            out[s] = chosen[s]
        elif "@" in s:
            out[s] = tuned(s)
        else:
            out[s] = reshape(catalog.config(s))  # raises UnknownVariant for a wrong name
    return out


def tuned(spec: str) -> Any:
    """``VARIANT@field=value[,field=value]``: the catalog variant reshaped, with dispatch
    tunables (:data:`TUNABLES`: integers, true or false, or a walk's name) replaced, so that a schedule is
    measured beside the catalog's without being a catalog variant."""
    name, _, fields = spec.partition("@")
    cfg = reshape(catalog.config(name))  # raises UnknownVariant for a wrong name
    changes: dict[str, Any] = {}
    for item in fields.split(","):
        key, _, value = item.partition("=")
        if key not in TUNABLES or key not in dataclasses.asdict(cfg) or not value:
            raise UsageError(
                f"--variants {spec!r}: {item!r} is not FIELD=VALUE with FIELD one of"
                f" {cfg.mode}'s {', '.join(t for t in TUNABLES if hasattr(cfg, t))}"
            )
        words = {"true": True, "false": False}
        changes[key] = int(value) if value.isdigit() else words.get(value, value)
    try:
        return dataclasses.replace(cfg, **changes)
    except ConfigError as err:
        raise UsageError(f"--variants {spec!r}: {err}") from None


# -- sizes, buffer sizes and bytes ---------------------------------------------------------------


@dataclasses.dataclass
class Plan:
    """One measurement: params, element counts per binding name, bytes that must move."""

    batch: int
    tokens: int
    cache: int
    params: dict[str, int]
    counts: dict[str, int]
    seqlens: int | None
    moved: Callable[[dict[str, int]], int]  # element bytes per binding name -> bytes moved
    # Inputs whose values matter (page tables, slots): used as they are.
    arrays: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)

    def params_of(self, struct: Any) -> dict[str, int]:
        """The plan's params that the params struct ``struct`` has fields for."""
        fields = dict(struct.fields)
        return {k: v for k, v in self.params.items() if k in fields}


def decode_append(cfg: Any, plan: Plan) -> bool:
    """A 1-token append whose work is the new rows alone (the floor target applies to it)."""
    appending = ("append_quant", "dense_append", "paged_append", "qkv", "paged_qkv")
    appends = cfg.mode in appending or getattr(cfg, "region", "") == "append"
    return plan.tokens == 1 and appends


def element_sizes(kernel: Kernel) -> dict[str, int]:
    """Bytes of one host value of each binding, by name (plans count host values: halves for
    f16 data moved as u32 words)."""
    return {b.name: b.host.size for b in kernel.bindings}


def plans(cfg: Any, size: dict) -> Iterator[Plan]:
    """The measurements of ``cfg`` at ``size`` (FULL or SMALL)."""
    S, P, h = size["cache"], size["prefill"], getattr(cfg, "kv_heads", HEADS)
    d = getattr(cfg, "head_dim", HEAD_DIM)  # paged_window: a table update, no head shape
    half = getattr(cfg, "half", d // 2)  # rotary's pairs per row (partial rotary: fewer)
    words = d if getattr(cfg, "bits", 8) == 8 else d // 2
    for B in size["batches"]:
        row = B * h * d  # elements of one token row over every batch and head
        match cfg.mode:
            case "transpose":
                n = B * S * h * d
                yield Plan(B, S, S, {"batchSize": B, "kvSeq": S},
                           dict.fromkeys(("key", "value", "present_key", "present_value"), n),
                           None, lambda z, n=n: 2 * n * (z["key"] + z["present_key"]))  # fmt: skip
            case "copy":
                n = B * h * S * d
                yield Plan(B, S, S, {"count": B * h * S},
                           dict.fromkeys(("src_k", "src_v", "present_key", "present_value"), n),
                           None, lambda z, n=n: 4 * n * z["src_k"])  # fmt: skip
            case "merge":
                for new in (P, 1):
                    past = S - new
                    counts = {"past_k": past * row, "past_v": past * row, "new_k": new * row,
                              "new_v": new * row, "present_key": S * row,
                              "present_value": S * row}  # fmt: skip
                    yield Plan(B, new, S,
                               {"count": B * h * S, "seq": S, "pastSeq": past, "keySeq": new},
                               counts, None, _sum_of(counts))  # fmt: skip
            case "merge_share":
                for new in (P, 1):
                    yield _merge_share(cfg, B, h, d, half, S, new)
            case "window_shift":
                for new in (P, 1):
                    yield _window_shift(cfg, B, h, d, half, S, new)
            case "build" | "build_quant":
                for seq in (P, S):
                    yield _build(cfg, B, h, d, half, words, seq, seq, None)
            case "append_quant":
                for seq in (P, 1):
                    yield _build(cfg, B, h, d, half, words, seq, S, S - 1)
            case "dense_append":
                for new in (P, 1):
                    yield _dense_append(cfg, B, h, d, half, S, new)
            case "dense_build":
                for seq in (P, S):
                    yield _dense_build(cfg, B, h, d, half, seq)
            case "dense_read":
                yield _dense_read(cfg, B, h, d, S)
            case "qkv":
                for new in (P, 1):
                    yield _qkv(cfg, B, S, new)
            case "paged_qkv":
                for new in (P, 1):
                    yield _paged_qkv(cfg, B, S, new)
            case "dense_retain":
                for new in (P, 1):
                    yield _dense_retain(cfg, B, h, d, S, new)
            case "dense_window_shift":
                for new in (P, 1):
                    yield _dense_window_shift(cfg, B, h, d, half, S, new)
            case "dense_convert":
                yield _dense_convert(cfg, B, h, d, S)
            case "paged_append":
                for new in (P, 1):
                    yield _paged_append(cfg, B, h, d, half, S, new)
            case "paged_read":
                yield _paged_read(cfg, B, h, d, S)
            case "paged_copy" | "paged_compact":
                yield _paged_pages(cfg, B, S, P)
            case "paged_window":
                yield _paged_window(cfg, B, S)


def _sum_of(moved: dict[str, int]) -> Callable[[dict[str, int]], int]:
    """Bytes moved when ``moved[name]`` elements of each binding move once."""
    return lambda z: sum(n * z[k] for k, n in moved.items() if k in z)


def _merge_share(cfg: Any, B: int, h: int, d: int, half: int, S: int, new: int) -> Plan:
    # seqlens_k = S - 1: the window is rows [S - new, S) of each head.
    counts = {"past_k": B * h * S * d, "past_v": B * h * S * d, "new_k": B * new * h * d,
              "new_v": B * new * h * d, "seqlens_k": B, "cos_cache": S * half,
              "sin_cache": S * half, "present_key": B * h * S * d,
              "present_value": B * h * S * d}  # fmt: skip
    if cfg.region == "retain":
        kept = B * h * (S - new) * d
        moved = dict.fromkeys(("past_k", "past_v", "present_key", "present_value"), kept)
        rows = B * h * S
    else:
        fresh = B * h * new * d
        moved = dict.fromkeys(("new_k", "new_v", "present_key", "present_value"), fresh)
        moved |= dict.fromkeys(("cos_cache", "sin_cache"), new * half)
        rows = B * h * new
    moved["seqlens_k"] = B
    return Plan(B, new, S, {"count": rows, "seq": S, "keySeq": new}, counts, S - 1, _sum_of(moved))


def _window_shift(cfg: Any, B: int, h: int, d: int, half: int, S: int, new: int) -> Plan:
    # seqlens_k = S + new - 1 on a full cache: `new` rows evicted, S - new survive, none cleared.
    counts = {"past_k": B * h * S * d, "past_v": B * h * S * d, "new_k": B * new * h * d,
              "new_v": B * new * h * d, "seqlens_k": B, "cos_cache": (S + new) * half,
              "sin_cache": (S + new) * half, "present_key": B * h * S * d,
              "present_value": B * h * S * d}  # fmt: skip
    survive, fresh = B * h * (S - new) * d, B * new * h * d
    moved = {"seqlens_k": B}
    if cfg.region != "append":
        moved |= {"past_k": survive, "past_v": survive}
    if cfg.region != "shift":
        moved |= {"new_k": fresh, "new_v": fresh}
        moved |= dict.fromkeys(("cos_cache", "sin_cache"), new * half)
    written = {"all": B * h * S * d, "shift": survive, "append": fresh}[cfg.region]
    moved |= {"present_key": written, "present_value": written}
    rows = B * h * (new if cfg.region == "append" else S)
    params = {"count": rows, "seq": S, "keySeq": new}
    return Plan(B, new, S, params, counts, S + new - 1, _sum_of(moved))


def _build(cfg: Any, B: int, h: int, d: int, half: int, words: int, seq: int, rows: int,
           seqlens: int | None) -> Plan:  # fmt: skip
    """build / build_quant (``rows == seq``) and append_quant (``rows`` = capacity)."""
    new = B * seq * h * d
    out_words = d if cfg.mode == "build" else words
    counts = {"src_k": new, "src_v": new, "seqlens_k": B, "k_norm_weight": d,
              "cos_cache": rows * half, "sin_cache": rows * half, "k_scale": h * d,
              "v_scale": h * d, "present_key": B * h * rows * out_words,
              "present_value": B * h * rows * out_words,
              "rotary_table": rows * 2 * half, "kv_scale": 2 * h * d}  # fmt: skip
    written = B * h * seq * out_words
    moved = counts | {"present_key": written, "present_value": written}
    moved |= dict.fromkeys(("cos_cache", "sin_cache"), seq * half)
    moved["rotary_table"] = seq * 2 * half
    params = {"count": B * h * seq, "seq": seq, "pastSeq": rows - seq, "perChannel": 1}
    if cfg.mode == "append_quant":
        params["totalSeq"] = rows
    return Plan(B, seq, rows, params, counts, seqlens, _sum_of(moved))


def _dense_words(cfg: Any, d: int) -> tuple[int, int]:
    """A dense config's u32 words per stored row and f32 side words per row (K's and V's)."""
    fmt, inline = cfg.format.value, cfg.scales == "inline"
    side = 0 if inline else 2 * formats.stat_words(fmt)
    return formats.row_words(fmt, d, inline), side


def _dense_append(cfg: Any, B: int, h: int, d: int, half: int, S: int, new: int) -> Plan:
    # seqlens_k = S - 1: the window is rows [S - new, S) of each head.
    words, side = _dense_words(cfg, d)
    counts = {"src_k": B * new * h * d, "src_v": B * new * h * d, "seqlens_k": B,
              "k_norm_weight": d, "cos_cache": S * half, "sin_cache": S * half, "present_key": B * h * S * words,
              "present_value": B * h * S * words, "present_scales": B * h * S * side}  # fmt: skip
    fresh = B * h * new
    moved = {"src_k": fresh * d, "src_v": fresh * d, "seqlens_k": B, "k_norm_weight": d,
             "cos_cache": new * half, "sin_cache": new * half, "present_key": fresh * words,
             "present_value": fresh * words, "present_scales": fresh * side}  # fmt: skip
    params = {"count": fresh, "keySeq": new, "seq": S}
    return Plan(B, new, S, params, counts, S - 1, _sum_of(moved))


def _dense_build(cfg: Any, B: int, h: int, d: int, half: int, seq: int) -> Plan:
    words, side = _dense_words(cfg, d)
    rows = B * h * seq
    counts = {"src_k": rows * d, "src_v": rows * d, "k_norm_weight": d, "cos_cache": seq * half,
              "sin_cache": seq * half, "present_key": rows * words, "present_value": rows * words,
              "present_scales": rows * side}  # fmt: skip
    params = {"count": rows, "seq": seq, "pastSeq": 0}
    return Plan(B, seq, seq, params, counts, None, _sum_of(counts))


def _dense_read(cfg: Any, B: int, h: int, d: int, S: int) -> Plan:
    words, side = _dense_words(cfg, d)
    rows = B * h * S
    counts = {"cache_key": rows * words, "cache_value": rows * words,
              "cache_scales": rows * side, "key": rows * d, "value": rows * d}  # fmt: skip
    return Plan(B, S, S, {"count": rows}, counts, None, _sum_of(counts))


def _qkv(cfg: Any, B: int, S: int, new: int) -> Plan:
    # seqlens_k = S - 1: the window is rows [S - new, S) of each head.
    d, half, tokens = cfg.head_dim, cfg.half, B * new
    row, side = (d, 0) if cfg.format is None else _dense_words(cfg, d)
    cache = B * cfg.kv_heads * S
    counts = {"qkv": tokens * cfg.heads * d, "seqlens_k": B, "qk_norm_weight": cfg.norm_weights,
              "rotary_table": S * 2 * half, "qkv_bias": cfg.heads * d,
              "q_out": tokens * cfg.q_heads * d, "present_key": cache * row,
              "present_value": cache * row, "present_scales": cache * side}  # fmt: skip
    fresh = tokens * cfg.kv_heads
    moved = counts | {"present_key": fresh * row, "present_value": fresh * row}
    moved |= {"present_scales": fresh * side, "rotary_table": new * 2 * half}
    params = {"count": tokens * cfg.rows, "keySeq": new, "seq": S}
    return Plan(B, new, S, params, counts, S - 1, _sum_of(moved))


def _paged_qkv(cfg: Any, B: int, S: int, new: int) -> Plan:
    # Positions [S - new, S) of each sequence (seqlens_k = S - 1), pages shuffled.
    view = cfg.pool_config
    d, half, tokens, p = cfg.head_dim, cfg.half, B * new, cfg.page_size
    per_seq = -(-S // p)
    table = _shuffled_table(B, per_seq, B)
    pos = np.arange(S - new, S)
    slots = (table[:, pos // p] * p + pos % p).astype(np.int32)
    row = view.row_units * view.unit
    sides = view.scale_geometry
    side = 0 if sides is None else sides.row
    counts = {"qkv": tokens * cfg.heads * d, "seqlens_k": B, "page_table": B * per_seq,
              "slot_mapping": tokens, "token_positions": tokens,
              "qk_norm_weight": cfg.norm_weights, "rotary_table": S * 2 * half,
              "qkv_bias": cfg.heads * d, "q_out": tokens * cfg.q_heads * d,
              } | _pool_counts(view, B * per_seq)  # fmt: skip
    fresh = tokens * cfg.kv_heads
    touched = B * ((S - 1) // p - (S - new) // p + 1)
    moved = counts | {"page_table": touched, "rotary_table": new * 2 * half,
                      "key_pages": fresh * row, "value_pages": fresh * row,
                      "kv_pages": 2 * fresh * row, "scale_pages": fresh * side}  # fmt: skip
    arrays = {"page_table": table.reshape(-1), "slot_mapping": slots.reshape(-1),
              "token_positions": np.tile(pos, B).astype(np.int32)}  # fmt: skip
    params = {"count": tokens * cfg.rows, "keySeq": new, "maxPages": per_seq}
    return Plan(B, new, S, params, counts, S - 1, _sum_of(moved), arrays)


def chain_plans(cfg: Any, plan: Plan) -> list[tuple[Any, Plan]]:
    """The unfused chain of a ``qkv`` plan (:func:`kvdsl.kernels.qkv.chain`): each kernel's
    config and its plan, one dispatch over every batch (one head per batch of its own)."""
    from kvdsl.kernels.qkv import chain
    from kvdsl.kernels.qkv_paged import chain as paged_chain

    ch = paged_chain(cfg) if cfg.mode == "paged_qkv" else chain(cfg)
    B, S, new, d, half = plan.batch, plan.cache, plan.tokens, cfg.head_dim, cfg.half
    hq, hkv = B * cfg.q_heads, B * cfg.kv_heads  # the heads, as batches of one head
    n = B * new * cfg.heads * d
    four = ("key", "value", "present_key", "present_value")
    out = [(ch.split, Plan(B, new, new, {"batchSize": B, "kvSeq": new}, dict.fromkeys(four, n),
                           None, _sum_of(dict.fromkeys(four, n))))]  # fmt: skip
    rows = {"q": hq, "k": hkv}
    for which, step in (("q", ch.q), ("k", ch.k)):
        if step is None:
            continue
        m = rows[which] * new * d
        counts = dict.fromkeys(("src_k", "src_v", "present_key", "present_value"), m)
        counts |= {"k_norm_weight": d, "cos_cache": S * half, "sin_cache": S * half}
        moved = counts | dict.fromkeys(("cos_cache", "sin_cache"), new * half)
        params = {"count": rows[which] * new, "seq": new, "pastSeq": S - new}
        out.append((step, Plan(B, new, S, params, counts, None, _sum_of(moved))))
    if cfg.mode == "paged_qkv":  # paged_append of every batch's K and V rows
        append = _paged_append(ch.append, B, cfg.kv_heads, d, half, S, new)
        return out + [(ch.append, append)]
    if cfg.format is not None:  # dense_append of the K and V heads, one head per batch
        append = _dense_append(ch.append, hkv, 1, d, half, S, new)
        return out + [(ch.append, append)]
    fresh = hkv * new * d
    counts = {"new_k": fresh, "new_v": fresh, "seqlens_k": hkv, "cos_cache": S * half,
              "sin_cache": S * half, "present_key": hkv * S * d, "present_value": hkv * S * d}  # fmt: skip
    moved = counts | {"present_key": fresh, "present_value": fresh}
    moved |= dict.fromkeys(("cos_cache", "sin_cache"), new * half)
    params = {"count": hkv * new, "seq": S, "keySeq": new}
    out.append((ch.append, Plan(hkv, new, S, params, counts, S - 1, _sum_of(moved))))
    return out


def _dense_retain(cfg: Any, B: int, h: int, d: int, S: int, new: int) -> Plan:
    # seqlens_k = S - 1: the window is rows [S - new, S) of each head, the rest retained.
    words, side = _dense_words(cfg, d)
    cache = {"past_k": words, "past_v": words, "present_key": words, "present_value": words,
             "past_scales": side, "present_scales": side}  # fmt: skip
    counts = {k: B * h * S * n for k, n in cache.items()} | {"seqlens_k": B}
    moved = {k: B * h * (S - new) * n for k, n in cache.items()} | {"seqlens_k": B}
    params = {"count": B * h * S, "seq": S, "keySeq": new}
    return Plan(B, new, S, params, counts, S - 1, _sum_of(moved))


def _dense_window_shift(cfg: Any, B: int, h: int, d: int, half: int, S: int, new: int) -> Plan:
    # seqlens_k = S + new - 1 on a full cache: `new` rows evicted, S - new survive, none cleared.
    words, side = _dense_words(cfg, d)
    cache = {"past_k": words, "past_v": words, "past_scales": side}
    out = {"present_key": words, "present_value": words, "present_scales": side}
    counts = {k: B * h * S * n for k, n in (cache | out).items()}
    counts |= {"src_k": B * new * h * d, "src_v": B * new * h * d, "seqlens_k": B,
               "cos_cache": (S + new) * half, "sin_cache": (S + new) * half,
               "rotary_table": (S + new) * 2 * half}  # fmt: skip
    survive, fresh = B * h * (S - new), B * h * new
    moved = {"seqlens_k": B}
    if cfg.region != "append":
        moved |= {k: survive * n for k, n in cache.items()}
    if cfg.region != "shift":
        moved |= {"src_k": fresh * d, "src_v": fresh * d, "cos_cache": new * half,
                  "sin_cache": new * half, "rotary_table": new * 2 * half}  # fmt: skip
    written = {"all": B * h * S, "shift": survive, "append": fresh}[cfg.region]
    moved |= {k: written * n for k, n in out.items()}
    rows = B * h * (new if cfg.region == "append" else S)
    params = {"count": rows, "seq": S, "keySeq": new}
    return Plan(B, new, S, params, counts, S + new - 1, _sum_of(moved))


def _dense_convert(cfg: Any, B: int, h: int, d: int, S: int) -> Plan:
    words, side = _dense_words(cfg, d)
    rows = B * h * S
    src, src_side = d, 0
    if cfg.source_fmt is not None:
        fmt, inline = cfg.source.value, cfg.source_scales == "inline"
        src = formats.row_words(fmt, d, inline)
        src_side = 0 if inline else 2 * formats.stat_words(fmt)
    counts = {"src_k": rows * src, "src_v": rows * src, "src_scales": rows * src_side,
              "present_key": rows * words, "present_value": rows * words,
              "present_scales": rows * side}  # fmt: skip
    return Plan(B, S, S, {"count": rows}, counts, None, _sum_of(counts))


def _pool_counts(cfg: Any, pages: int, scale: int = 1, names: tuple = ()) -> dict[str, int]:
    """Host values of each pool binding of ``pages`` pages, times ``scale`` (moved counts);
    ``names``: the K, V, combined and scale pools' names (default: the cache's)."""
    k, v, kv, side = names or ("key_pages", "value_pages", "kv_pages", "scale_pages")
    sides = cfg.scale_geometry
    out = dict.fromkeys((k, v, kv), pages * cfg.page_values * scale)
    out[side] = 0 if sides is None else pages * sides.stride * scale
    return out


def _shuffled_table(B: int, per_seq: int, seed: int) -> np.ndarray:
    """Page tables ``[B, per_seq]``: the pool's page ids, shuffled."""
    rng = np.random.default_rng(seed)
    return rng.permutation(B * per_seq).astype(np.int32).reshape(B, per_seq)


def _paged_append(cfg: Any, B: int, h: int, d: int, half: int, S: int, new: int) -> Plan:
    # seqlens_k = S - 1: the new tokens are positions [S - new, S) of each sequence.
    p = cfg.page_size
    per_seq = -(-S // p)
    table = _shuffled_table(B, per_seq, B)
    pos = np.arange(S - new, S)
    slots = (table[:, pos // p] * p + pos % p).astype(np.int32)
    row = cfg.row_units * cfg.unit  # host values of one stored row
    sides = cfg.scale_geometry
    side = 0 if sides is None else sides.row
    counts = {"src_k": B * new * h * d, "src_v": B * new * h * d, "seqlens_k": B,
              "page_table": B * per_seq, "slot_mapping": B * new, "token_positions": B * new,
              "k_norm_weight": d, "cos_cache": S * half,
              "sin_cache": S * half} | _pool_counts(cfg, B * per_seq)  # fmt: skip
    fresh = B * h * new
    touched = B * ((S - 1) // p - (S - new) // p + 1)
    moved = {"src_k": fresh * d, "src_v": fresh * d, "seqlens_k": B, "page_table": touched,
             "slot_mapping": B * new, "token_positions": B * new, "k_norm_weight": d,
             "cos_cache": new * half, "sin_cache": new * half, "key_pages": fresh * row,
             "value_pages": fresh * row, "kv_pages": 2 * fresh * row,
             "scale_pages": fresh * side}  # fmt: skip
    arrays = {"page_table": table.reshape(-1), "slot_mapping": slots.reshape(-1),
              "token_positions": np.tile(pos, B).astype(np.int32)}  # fmt: skip
    params = {"count": fresh, "keySeq": new, "maxPages": per_seq}
    return Plan(B, new, S, params, counts, S - 1, _sum_of(moved), arrays)


def _paged_read(cfg: Any, B: int, h: int, d: int, S: int) -> Plan:
    p = cfg.page_size
    per_seq = -(-S // p)
    table = _shuffled_table(B, per_seq, B)
    pos = np.arange(S)
    slots = (table[:, pos // p] * p + pos % p).astype(np.int32)
    rows = B * h * S
    counts = {"seqlens_k": B, "page_table": B * per_seq, "slot_mapping": B * S,
              "key": rows * d, "value": rows * d} | _pool_counts(cfg, B * per_seq)  # fmt: skip
    arrays = {"page_table": table.reshape(-1), "slot_mapping": slots.reshape(-1)}
    params = {"count": rows, "seq": S, "maxPages": per_seq}
    return Plan(B, S, S, params, counts, S - 1, _sum_of(counts), arrays)


def _paged_pages(cfg: Any, B: int, S: int, P: int) -> Plan:
    """paged_copy: each sequence's first ``P`` (prefill) tokens' pages copied to fresh pages;
    paged_compact: every other page of a pool of ``B * S / page_size`` pages gathered."""
    p = cfg.page_size
    if cfg.mode == "paged_copy":
        n = B * -(-P // p)
        pages = 2 * n
        ids = np.stack([np.arange(n), n + np.arange(n)], axis=1).astype(np.int32)
        counts = {"page_pairs": 2 * n} | _pool_counts(cfg, pages)
        moved = {"page_pairs": 2 * n} | _pool_counts(cfg, n, 2)
        arrays = {"page_pairs": ids.reshape(-1)}
    else:
        pages = B * -(-S // p)
        n = pages // 2
        names = ("compact_key", "compact_value", "compact_kv", "compact_scales")
        counts = {"live_pages": n} | _pool_counts(cfg, pages) | _pool_counts(cfg, n, 1, names)
        moved = {"live_pages": n} | _pool_counts(cfg, n) | _pool_counts(cfg, n, 1, names)
        arrays = {"live_pages": (2 * np.arange(n)).astype(np.int32)}
    return Plan(B, n * p, S, {"count": n}, counts, None, _sum_of(moved), arrays)


def _paged_window(cfg: Any, B: int, S: int) -> Plan:
    per_seq = -(-S // cfg.page_size)
    entries = B * per_seq
    counts = {"seqlens_k": B, "page_table": entries, "freed_pages": entries}
    moved = {"seqlens_k": B, "page_table": 2 * entries, "freed_pages": entries}
    arrays = {"page_table": _shuffled_table(B, per_seq, B).reshape(-1)}
    params = {"count": entries, "maxPages": per_seq, "window": S // 2}
    return Plan(B, S, S, params, counts, S - 1, _sum_of(moved), arrays)


def contiguous(cfg: Any) -> tuple[str, Any] | None:
    """The contiguous append of a ``paged_append`` config's format, transforms and input type
    (named for the table), or None: ``merge_share``'s flat append for f32 and f16 rows (which
    has no K RMSNorm), ``dense_append`` for a dense format."""
    if cfg.mode != "paged_append":
        return None
    shape = {"kv_heads": cfg.kv_heads, "head_dim": cfg.head_dim}
    same = {"rotary": cfg.rotary, "input_type": cfg.input_type}
    if cfg.dense is not None:
        from kvdsl.kernels.dense import DenseAppendConfig

        c = DenseAppendConfig(
            **shape, **same, format=cfg.format.value, scales=cfg.scales, k_norm=cfg.k_norm
        )
        return "dense_append (contiguous)", c
    if cfg.k_norm:
        return None
    from kvdsl.kernels.merge_share import MergeShareConfig

    c = MergeShareConfig(
        **shape, **same, region="append", walk="flat", present_type=cfg.format.value
    )
    return "merge_share append (contiguous)", c


class Pool:
    """Random non-zero inputs, made once per (element count, dtype) and shared by every buffer."""

    def __init__(self) -> None:
        self.arrays: dict[tuple[int, str], np.ndarray] = {}
        self.rng = np.random.default_rng(0)

    def get(self, n: int, dtype: np.dtype) -> np.ndarray:
        key = (n, np.dtype(dtype).str)
        if key not in self.arrays:
            x = self.rng.random(n, np.float32) + 0.5
            integer = np.dtype(dtype).kind in "iu"
            self.arrays[key] = (x * 1000).astype(dtype) if integer else x.astype(dtype)
        return self.arrays[key]

    def buffers(self, bindings, plan: Plan) -> dict[str, np.ndarray]:
        """One array per binding, sized by ``plan``; ``seqlens_k`` holds the plan's value, the
        plan's own arrays (page tables, slots) are used as they are."""
        out = {}
        for b in bindings:
            if b.name in plan.arrays:
                out[b.name] = plan.arrays[b.name]
            elif b.name == "seqlens_k":
                out[b.name] = np.full(plan.batch, plan.seqlens, np.int32)
            else:
                out[b.name] = self.get(plan.counts[b.name], b.host.dtype)
        return out


def biggest_buffer(selection: dict[str, Any], size: dict) -> int:
    """Bytes of the largest buffer the run will bind (the roofline copy's included)."""
    big = 0
    for name, cfg in selection.items():
        kernel = catalog.build_config(cfg, name)
        z = element_sizes(kernel)
        for plan in plans(cfg, size):
            big = max(big, roofline.copy_bytes(plan.moved(z)) // 4)  # the copy's 4 buffers
            big = max(big, *(plan.counts[b] * z[b] for b in z if b in plan.counts))
    return big
