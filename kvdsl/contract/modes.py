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

from typing import Any, Callable

Sizes = dict[str, tuple[str, int]]

#: mode → its shape variables (``positions``, the rotary table's rows, is added where a kernel
#: binds ``cos_cache``)
SHAPES: dict[str, tuple[str, ...]] = {
    "transpose": ("batch", "kvSeq"),
    "copy": ("rows",),
    "merge": ("batch", "pastSeq", "keySeq"),
    "merge_share": ("batch", "seq", "keySeq"),
    "window_shift": ("batch", "seq", "keySeq"),
    "build": ("batch", "seq", "pastSeq"),
    "build_quant": ("batch", "seq", "pastSeq", "perChannel"),
    "append_quant": ("batch", "seq", "totalSeq", "perChannel"),
}

_COUNT = "rows of head_dim values the kernel writes per output"
_PER_CHANNEL = (
    "1: k_scale and v_scale hold one scale per channel (kv_heads × head_dim); 0: one scale each"
)

#: mode → params field → its meaning in one line
MEANINGS: dict[str, dict[str, str]] = {
    "transpose": {
        "batchSize": "batches in key/value (BSH) and present_key/present_value (BNSH)",
        "kvSeq": "tokens per batch",
    },
    "copy": {"count": "rows of head_dim values to copy from src to present"},
    "merge": {
        "count": "present rows: batch × kv_heads × seq",
        "seq": "present tokens per head: pastSeq + keySeq",
        "pastSeq": "past tokens per head (rows of past_k/past_v per head)",
        "keySeq": "new tokens per batch (rows of new_k/new_v per batch)",
    },
    "merge_share": {
        "count": "rows the pass owns: batch × kv_heads × seq (retain) or × keySeq (append)",
        "seq": "the cache's capacity: rows per head of past and present",
        "keySeq": "new tokens per batch (rows of new_k/new_v per batch)",
    },
    "window_shift": {
        "count": "rows the pass owns: batch × kv_heads × seq (all, shift) or × keySeq (append)",
        "seq": "the window's capacity: rows per head of past and present",
        "keySeq": "new tokens per batch (rows of new_k/new_v per batch)",
    },
    "build": {
        "count": "present rows: batch × kv_heads × seq",
        "seq": "new tokens per batch, also the present's rows per head",
        "pastSeq": "absolute position of token 0 (the rotary row; unused without rotary)",
    },
    "build_quant": {
        "count": "present rows: batch × kv_heads × seq",
        "seq": "new tokens per batch, also the present's rows per head",
        "pastSeq": "absolute position of token 0 (the rotary row; unused without rotary)",
        "perChannel": _PER_CHANNEL,
    },
    "append_quant": {
        "count": "new rows: batch × kv_heads × seq",
        "seq": "new tokens per batch (rows of src_k/src_v per batch)",
        "pastSeq": "rotary position of token 0 when rotary_position is past_seq; else unused",
        "totalSeq": "the cache's capacity: rows per head of present_key/present_value",
        "perChannel": _PER_CHANNEL,
    },
}


def shape(cfg: Any, bindings: list[str]) -> list[str]:
    """The shape variables of ``cfg``'s variant, whose kernel has ``bindings``."""
    return list(SHAPES[cfg.mode]) + (["positions"] if "cos_cache" in bindings else [])


def _hidden(cfg: Any) -> int:
    return cfg.kv_heads * cfg.head_dim


def _cache_row(cfg: Any) -> int:
    """Host values per token of a BNSH/BSH cache (all heads): packed words for quantised ones."""
    return cfg.kv_heads * (cfg.packed if hasattr(cfg, "packed") else cfg.head_dim)


def _rows(cfg: Any) -> Sizes:
    """The bindings every row mode (build, build_quant, append_quant) may have."""
    sizes: Sizes = {
        "src_k": ("batch * seq", _hidden(cfg)),
        "src_v": ("batch * seq", _hidden(cfg)),
        "seqlens_k": ("batch", 1),
        "k_norm_weight": ("1", cfg.head_dim),
        "k_scale": (f"perChannel * {_hidden(cfg) - 1} + 1", 1),
        "v_scale": (f"perChannel * {_hidden(cfg) - 1} + 1", 1),
    }
    return sizes | _rotary(cfg)


def _rotary(cfg: Any) -> Sizes:
    """cos_cache and sin_cache: ``head_dim / 2`` f32 per position."""
    return {
        "cos_cache": ("positions", cfg.head_dim // 2),
        "sin_cache": ("positions", cfg.head_dim // 2),
    }


def _window(cfg: Any) -> Sizes:
    """The buffer-sharing and sliding-window modes' bindings."""
    return {
        "seqlens_k": ("batch", 1),
        "past_k": ("batch * seq", _hidden(cfg)),
        "past_v": ("batch * seq", _hidden(cfg)),
        "new_k": ("batch * keySeq", _hidden(cfg)),
        "new_v": ("batch * keySeq", _hidden(cfg)),
        "present_key": ("batch * seq", _hidden(cfg)),
        "present_value": ("batch * seq", _hidden(cfg)),
    } | _rotary(cfg)


def _present(rows: str, width: int) -> Sizes:
    return {"present_key": (rows, width), "present_value": (rows, width)}


#: mode → cfg → binding name → (rows, width); a binding a variant lacks is ignored
SIZES: dict[str, Callable[[Any], Sizes]] = {
    "transpose": lambda cfg: {
        "key": ("batch * kvSeq", _hidden(cfg)),
        "value": ("batch * kvSeq", _hidden(cfg)),
    }
    | _present("batch * kvSeq", _hidden(cfg)),
    "copy": lambda cfg: {
        "src_k": ("rows", cfg.head_dim),
        "src_v": ("rows", cfg.head_dim),
    }
    | _present("rows", cfg.head_dim),
    "merge": lambda cfg: {
        "past_k": ("batch * pastSeq", _hidden(cfg)),
        "past_v": ("batch * pastSeq", _hidden(cfg)),
        "new_k": ("batch * keySeq", _hidden(cfg)),
        "new_v": ("batch * keySeq", _hidden(cfg)),
    }
    | _present("batch * (pastSeq + keySeq)", _hidden(cfg)),
    "merge_share": _window,
    "window_shift": _window,
    "build": lambda cfg: _rows(cfg) | _present("batch * seq", _cache_row(cfg)),
    "build_quant": lambda cfg: _rows(cfg) | _present("batch * seq", _cache_row(cfg)),
    "append_quant": lambda cfg: _rows(cfg) | _present("batch * totalSeq", _cache_row(cfg)),
}
