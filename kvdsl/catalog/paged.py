"""The catalog's variants of the paged caches' modes (:mod:`kvdsl.kernels.paged`,
``paged_append``, ``paged_read``, ``paged_pages``) over the models' shapes."""

from __future__ import annotations

from typing import Any

from kvdsl.catalog.models import Model
from kvdsl.kernels.config import Element, KernelConfig
from kvdsl.kernels.dense import ScalePlace
from kvdsl.kernels.paged import PagedAppendConfig, PagedConfig, PagedFormat, PagedReadConfig
from kvdsl.kernels.paged_pages import PagedCompactConfig, PagedCopyConfig, PagedWindowConfig
from kvdsl.nodes.paged import Addressing, PageLayout, Pool


def paged_variants(models: dict[str, Model]) -> dict[str, PagedConfig]:
    """Named paged appends and reads at Llama-3.1-8B's shape (8 × 128): page sizes 16 and 64,
    NHD and HND, separate and combined pools, both addressings, f32 and f16 pools, the dense
    formats (scales inline and in scale_pages; ORT's ``ort_q4``), rotary and (Qwen3's shape) K
    RMSNorm."""
    f16, rope = {"format": PagedFormat.F16}, {"rotary": True}
    table, side = {"addressing": Addressing.PAGE_TABLE}, {"scales": ScalePlace.SIDE}
    hnd, p64 = {"page_layout": PageLayout.HND}, {"page_size": 64}
    f16_out = {"output_type": Element.F16}
    v: dict[str, PagedConfig] = {}

    def add(name: str, key: str = "llama31_8b", **fields: Any) -> None:
        cls = PagedReadConfig if name.startswith("read") else PagedAppendConfig
        v[f"paged_{name}_{key}"] = cls(**models[key].shape, **fields)

    for size in (16, 64):
        for lay in PageLayout:
            tag, geo = f"p{size}_{lay.value}", {"page_size": size, "page_layout": lay}
            for a in Addressing:
                add(f"append_{a.value}_{tag}", **geo, addressing=a)
                add(f"read_{a.value}_{tag}", **geo, addressing=a)
            add(f"append_rotary_f16_{tag}", **geo, **rope, **f16)
    tvm = {"page_size": 16, "page_layout": PageLayout.HND, "pool": Pool.COMBINED}
    add("append_rotary_tvm_f16", **tvm, **rope, **f16)
    add("read_tvm_f16", **tvm, **f16, **f16_out)
    add("append_page_table_rotary_p64_hnd", **p64, **hnd, **table, **rope)
    combined = {"pool": Pool.COMBINED, "k_norm": True}
    add("append_knorm_rotary_combined", "qwen3_06b", **combined, **table, **rope)
    add("append_f16_in_p16_nhd", input_type=Element.F16, **f16)
    # Dense formats in pages, their scales inline or in scale_pages.
    add("append_int8_side_page_table_p16_nhd", format=PagedFormat.INT8, **side, **table)
    add("append_rotary_q4_0_p16_hnd", format=PagedFormat.Q4_0, **rope, **hnd)
    add("append_rotary_int4_page_table_p64_nhd", format=PagedFormat.INT4, **rope, **table, **p64)
    add("append_rotary_q8_0_page_table_p16_nhd", format=PagedFormat.Q8_0, **rope, **table)
    asym = {"format": PagedFormat.INT4_ASYM, **side}
    add("append_knorm_int4_asym_side_page_table", "qwen3_06b", **asym, k_norm=True, **table)
    add("read_int8_side_page_table_p16_nhd", format=PagedFormat.INT8, **side)
    slots = {"addressing": Addressing.SLOT_MAPPING}
    add("read_q8_0_slot_mapping_p16_hnd", format=PagedFormat.Q8_0, **slots, **hnd)
    add("read_int4_asym_side_p64_hnd_f16", **asym, **hnd, **p64, **f16_out)
    # ONNX Runtime's 4-bit rows, K and V in its rotated basis (attend_paged_ort_q4_p16_nhd)
    add("append_rotary_ort_q4_page_table_p16_nhd", format=PagedFormat.ORT_Q4, **rope, **table)
    return v


def paged_pages_variants(models: dict[str, Model]) -> dict[str, KernelConfig]:
    """Named page kernels at Llama-3.1-8B's shape: copy and compact of f32 and f16 pools,
    separate and combined, and of int8 pages with side scales and q4_0 pages; the window at
    page sizes 16, 64 and 256."""
    llama = models["llama31_8b"].shape
    v: dict[str, KernelConfig] = {}
    for ty in ("f32", "f16"):
        for pool in Pool:
            tag = f"{ty}_{pool.value}"
            for mode, cls in (("copy", PagedCopyConfig), ("compact", PagedCompactConfig)):
                v[f"paged_{mode}_{tag}_p16_llama31_8b"] = cls(
                    **llama, pool=pool, format=ty, page_layout=PageLayout.NHD
                )
    side = {"scales": ScalePlace.SIDE}
    for mode, cls in (("copy", PagedCopyConfig), ("compact", PagedCompactConfig)):
        v[f"paged_{mode}_int8_side_p16_llama31_8b"] = cls(**llama, format=PagedFormat.INT8, **side)
        v[f"paged_{mode}_q4_0_p16_llama31_8b"] = cls(**llama, format=PagedFormat.Q4_0)
    v["paged_copy_f32_separate_p64_llama31_8b"] = PagedCopyConfig(**llama, page_size=64)
    for size in (16, 64, 256):
        v[f"paged_window_p{size}"] = PagedWindowConfig(page_size=size)
    return v


#: The functions that name the paged family's variants over the catalog's models.
NAMED = (
    paged_variants,
    paged_pages_variants,
)
