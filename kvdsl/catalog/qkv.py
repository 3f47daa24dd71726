"""The catalog's variants of the fused QKV modes (:mod:`kvdsl.kernels.qkv`, ``qkv_paged``),
each model with its own query heads and transforms."""

from __future__ import annotations

from typing import Any

from kvdsl.catalog.models import Model
from kvdsl.kernels.config import Element, RowLayout
from kvdsl.kernels.dense import DenseFormat, ScalePlace
from kvdsl.kernels.qkv_config import QkvConfig
from kvdsl.kernels.qkv_paged import PagedQkvConfig
from kvdsl.nodes.paged import Addressing, PageLayout, Pool


def qkv_variants(models: dict[str, Model]) -> dict[str, QkvConfig]:
    """Named ``qkv`` variants: each model's own transforms (Llama 3.1 8B and Phi-3 rotary;
    Qwen3 0.6B and Gemma 3 1B Q and K RMSNorm and rotary; Qwen2.5 0.5B the QKV bias and rotary),
    f32 throughout and in f16 (input, Q and cache), Q in BNSH; Llama's also with Q in BSH, and
    K/V appended without rotary; Phi-2's partial rotary; and caches in dense formats (int8 and
    q4_0 at Llama's shape, int8 at Qwen3's, q8_0 at Gemma's, int4 with side scales at
    Qwen2.5's), and int4 at Llama's with K rotated over the whole head (``rotation``); ORT's
    ``ort_q4`` at Llama's (K and V in its own rotated basis)."""
    norms = {"q_norm": True, "k_norm": True}
    own = {"llama31_8b": {}, "phi3_mini": {}, "qwen3_06b": norms, "gemma3_1b": norms}
    own["qwen25_05b"] = {"bias": True}
    f16 = {"input_type": Element.F16, "present_type": Element.F16, "q_type": Element.F16}
    v: dict[str, QkvConfig] = {}

    def add(tag: str, key: str, **fields: Any) -> None:
        shape = models[key].heads
        v[f"qkv_{tag}{key}"] = QkvConfig(**shape, **fields)

    for key, extra in own.items():
        add("", key, **models[key].rotary, **extra)
        add("f16_", key, **models[key].rotary, **extra, **f16)
    add("bsh_", "llama31_8b", rotary=True, q_layout=RowLayout.BSH)
    add("norotary_", "llama31_8b")
    add("partial_", "phi2", **models["phi2"].rotary)
    for key, fmt, place in (
        ("llama31_8b", DenseFormat.INT8, ScalePlace.INLINE),
        ("llama31_8b", DenseFormat.Q4_0, ScalePlace.INLINE),
        ("qwen3_06b", DenseFormat.INT8, ScalePlace.INLINE),
        ("gemma3_1b", DenseFormat.Q8_0, ScalePlace.INLINE),
        ("qwen25_05b", DenseFormat.INT4, ScalePlace.SIDE),
    ):
        tag = fmt.value + ("_side_" if place is ScalePlace.SIDE else "_")
        add(tag, key, rotary=True, **own[key], format=fmt, scales=place)
    # int4 with K rotated over the whole head (attend_int4_rotation128_llama31_8b reads it)
    int4 = {"rotary": True, "format": DenseFormat.INT4}
    add("int4_rotation128_", "llama31_8b", **int4, rotation=models["llama31_8b"].head_dim)
    add("int4_", "llama31_8b", **int4)  # its unrotated twin
    # ONNX Runtime's 4-bit cache, K and V in its own rotated basis (attend_ort_q4_llama31_8b)
    add("ort_q4_", "llama31_8b", rotary=True, format=DenseFormat.ORT_Q4)
    return v


def qkv_paged_variants(models: dict[str, Model]) -> dict[str, PagedQkvConfig]:
    """Named ``paged_qkv`` variants: Llama 3.1 8B f16 (input, Q and pages) slot-mapped in pages
    of 16 (vLLM's), and in a combined HND pool through a page table (TVM's); Qwen3 0.6B with Q
    and K RMSNorm into an int8 page-table cache; Llama in q4_0 and in int4 with side scales in
    ``scale_pages``, slot-mapped; Qwen2.5 0.5B (the bias) int4 through a page table; Gemma 3 1B
    (its norms) q8_0 HND through a page table; Phi-3 f32 in pages of 32."""
    f16 = {"input_type": Element.F16, "present_type": Element.F16, "q_type": Element.F16}
    table, slots = {"addressing": Addressing.PAGE_TABLE}, {"addressing": Addressing.SLOT_MAPPING}
    norms, hnd = {"q_norm": True, "k_norm": True}, {"page_layout": PageLayout.HND}
    v: dict[str, PagedQkvConfig] = {}

    def add(tag: str, key: str, **fields: Any) -> None:
        shape = models[key].heads | {"rotary": True}
        v[f"paged_qkv_{tag}_{key}"] = PagedQkvConfig(**shape, **fields)

    add("f16_p16", "llama31_8b", **f16)
    add("f16_combined_hnd", "llama31_8b", **f16, **table, pool=Pool.COMBINED, **hnd)
    add("int8_page_table", "qwen3_06b", **norms, format=DenseFormat.INT8, **table)
    add("q4_0", "llama31_8b", format=DenseFormat.Q4_0, **slots)
    add("int4_side", "llama31_8b", format=DenseFormat.INT4, scales=ScalePlace.SIDE)
    add("int4_page_table", "qwen25_05b", bias=True, format=DenseFormat.INT4, **table)
    add("q8_0_hnd_page_table", "gemma3_1b", **norms, format=DenseFormat.Q8_0, **table, **hnd)
    add("p32", "phi3_mini", page_size=32)
    return v


#: The functions that name the qkv family's variants over the catalog's models.
NAMED = (
    qkv_variants,
    qkv_paged_variants,
)
