"""The catalog's ``attend`` and ``attend_merge`` variants (:mod:`kvdsl.kernels.attend`).

A host runs an ``attend_*`` variant, and, when its ``chunks`` is more than one, the
``attend_merge_*`` variant of the same query heads, head dim, sinks and output (the merge of
every ``attend`` variant is named by :func:`merge_of`). The shapes add the query heads to the
catalog's KV-cache shapes, from the models' published configs:

| key          | model family   | query heads | KV heads | head dim | options                   |
|--------------|----------------|-------------|----------|----------|---------------------------|
| llama31_8b   | Llama-3.1-8B   | 32          | 8        | 128      | GQA 4                     |
| gemma3_1b    | Gemma-3-1B     | 4           | 1        | 256      | MQA, sliding window       |
| gemma2_2b    | Gemma-2-2B     | 8           | 4        | 256      | window, logit soft-cap    |
| gpt_oss_20b  | gpt-oss-20b    | 64          | 8        | 64       | GQA 8, window, sinks      |
"""

from __future__ import annotations

from kvdsl.catalog.models import GPT_OSS, Model
from kvdsl.kernels.attend import AttendConfig, CacheLayout, RowLayout
from kvdsl.kernels.attend.config import merge_config
from kvdsl.kernels.config import Element
from kvdsl.kernels.dense import ScalePlace
from kvdsl.nodes.paged import PageLayout, Pool

#: The catalog models that have attend variants, and gpt-oss-20b.
ATTEND_MODELS = ("llama31_8b", "gemma3_1b", "gemma2_2b", "gpt_oss_20b")


def merge_of(name: str, variants: dict) -> str:
    """The name of the ``attend_merge`` variant among ``variants`` that merges the partials of
    ``attend`` variant ``name``."""
    want = merge_config(variants[name])
    for other, cfg in variants.items():
        if cfg.mode == "attend_merge" and cfg == want:
            return other
    raise KeyError(f"no attend_merge variant merges {name}'s partials")


def attend_variants(models: dict[str, Model]) -> dict[str, AttendConfig]:
    """Named attend variants and their merges: Llama-3.1-8B's shape over f32 and f16 caches,
    contiguous (BNSH) and paged (NHD, HND, TVM's combined HND pool), Q and O as the fused QKV
    kernel writes them (BSH) or BNSH; Gemma-3-1B's MQA with a sliding window; Gemma-2-2B's
    window with soft-capping and sinks; gpt-oss-20b's GQA 8 with sinks, a window and up to 8
    new tokens (speculative verification); Llama-3.1-8B's quantised caches
    (:func:`quantised_variants`)."""
    heads = {k: (GPT_OSS if k == "gpt_oss_20b" else models[k]).heads for k in ATTEND_MODELS}
    llama = heads["llama31_8b"] | {"max_queries": 2}
    paged = {"cache": CacheLayout.PAGED}
    f16 = {"cache_type": Element.F16}
    bsh16 = {
        "q_layout": RowLayout.BSH,
        "q_type": Element.F16,
        "o_layout": RowLayout.BSH,
        "o_type": Element.F16,
    }
    options = {"sliding_window": True, "softcap": True, "sinks": True}
    v: dict[str, AttendConfig] = {
        "attend_llama31_8b": AttendConfig(**llama),
        "attend_bsh_llama31_8b": AttendConfig(
            **llama, q_layout=RowLayout.BSH, o_layout=RowLayout.BSH
        ),
        "attend_f16_llama31_8b": AttendConfig(**llama, **f16, **bsh16),
        "attend_paged_p16_nhd_llama31_8b": AttendConfig(**llama, **paged),
        "attend_paged_p64_hnd_llama31_8b": AttendConfig(
            **llama, **paged, page_size=64, page_layout=PageLayout.HND
        ),
        "attend_paged_f16_p16_nhd_llama31_8b": AttendConfig(**llama, **paged, **f16),
        "attend_paged_tvm_f16_llama31_8b": AttendConfig(
            **llama, **paged, **f16, **bsh16, page_layout=PageLayout.HND, pool=Pool.COMBINED
        ),
        "attend_window_gemma3_1b": AttendConfig(
            **heads["gemma3_1b"], max_queries=2, sliding_window=True
        ),
        "attend_paged_window_f16_p16_nhd_gemma3_1b": AttendConfig(
            **heads["gemma3_1b"], **paged, **f16, sliding_window=True
        ),
        "attend_options_gemma2_2b": AttendConfig(**heads["gemma2_2b"], **options),
        "attend_paged_options_f16_p16_hnd_gemma2_2b": AttendConfig(
            **heads["gemma2_2b"], **paged, **f16, **options, page_layout=PageLayout.HND
        ),
        "attend_spec_window_sinks_gpt_oss_20b": AttendConfig(
            **heads["gpt_oss_20b"], max_queries=8, sliding_window=True, sinks=True
        ),
        "attend_paged_spec_sinks_combined_gpt_oss_20b": AttendConfig(
            **heads["gpt_oss_20b"], **paged, max_queries=8, sinks=True, pool=Pool.COMBINED
        ),
    }
    v |= quantised_variants(llama)
    merges: dict[str, AttendConfig] = {}
    for name, cfg in v.items():
        m = merge_config(cfg)
        if m in merges.values():
            continue
        model = next(k for k in heads if name.endswith(k))
        tag = "_".join(
            t
            for t, on in (
                ("sinks", m.sinks),
                ("bsh", m.o_layout is RowLayout.BSH),
                ("f16", m.o_type is Element.F16),
            )
            if on
        )
        merges[f"attend_merge_{tag + '_' if tag else ''}{model}"] = m
    return v | merges


#: The quantised contiguous caches attend reads, by name part: (format, scales) as the
#: ``dense_append_{part}`` writer variants write them (and ``build_quant`` / ``append_quant``
#: for the template's).
CONTIGUOUS_FORMATS = {
    "int8": ("int8", ScalePlace.INLINE),
    "int8_side": ("int8", ScalePlace.SIDE),
    "int4": ("int4", ScalePlace.INLINE),
    "int4_side": ("int4", ScalePlace.SIDE),
    "int4_asym": ("int4_asym", ScalePlace.INLINE),
    "int4_asym_side": ("int4_asym", ScalePlace.SIDE),
    "q8_0": ("q8_0", ScalePlace.INLINE),
    "q4_0": ("q4_0", ScalePlace.INLINE),
    "ort_q4": ("ort_q4", ScalePlace.INLINE),
    "template_int8": ("template_int8", ScalePlace.INLINE),
    "template_int4": ("template_int4", ScalePlace.INLINE),
}
#: The quantised paged caches attend reads (page-table pools), by name part: (format, scales,
#: page size, page layout) as the paged writer and reader variants of the name part hold them
#: (``paged_append_int8_side_page_table_p16_nhd``, ``paged_append_rotary_int4_page_table_p64_nhd``,
#: ``paged_qkv_int4_side``, ``paged_read_int4_asym_side_p64_hnd_f16``,
#: ``paged_append_rotary_q8_0_page_table_p16_nhd``, ``paged_qkv_q4_0``,
#: ``paged_append_rotary_q4_0_p16_hnd``, ``paged_append_rotary_ort_q4_page_table_p16_nhd``); int4
#: in HND pages of 64 as the f32 ``p64_hnd`` ones.
PAGED_FORMATS = {
    "int8_side_p16_nhd": ("int8", ScalePlace.SIDE, 16, PageLayout.NHD),
    "int4_p64_nhd": ("int4", ScalePlace.INLINE, 64, PageLayout.NHD),
    "int4_side_p16_nhd": ("int4", ScalePlace.SIDE, 16, PageLayout.NHD),
    "int4_p64_hnd": ("int4", ScalePlace.INLINE, 64, PageLayout.HND),
    "int4_asym_side_p64_hnd": ("int4_asym", ScalePlace.SIDE, 64, PageLayout.HND),
    "q8_0_p16_nhd": ("q8_0", ScalePlace.INLINE, 16, PageLayout.NHD),
    "q4_0_p16_nhd": ("q4_0", ScalePlace.INLINE, 16, PageLayout.NHD),
    "q4_0_p16_hnd": ("q4_0", ScalePlace.INLINE, 16, PageLayout.HND),
    "ort_q4_p16_nhd": ("ort_q4", ScalePlace.INLINE, 16, PageLayout.NHD),
}


#: KIVI's 2-bit groups attend reads, as the ``kivi_flush_2bit_g{group}_llama31_8b`` writer
#: variants write them (contiguous), and in pages of 256 tokens as the
#: ``kivi_flush_2bit_g{group}_paged256_llama31_8b`` ones do.
KIVI_GROUPS = (128, 64, 32)
KIVI_PAGED_GROUPS = (128, 32)


def quantised_variants(llama: dict) -> dict[str, AttendConfig]:
    """Attend over Llama-3.1-8B's quantised caches (``llama``: its attend fields), Q and O f32
    BNSH: ``attend_{part}_llama31_8b`` of each :data:`CONTIGUOUS_FORMATS` part and
    ``attend_paged_{part}_llama31_8b`` of each :data:`PAGED_FORMATS` part, so a host pairs
    each writer variant with the reader of its cache; ``attend_int4_rotation128_llama31_8b``
    reads the int4 cache ``qkv_int4_rotation128_llama31_8b`` writes, K rotated over the whole
    head; ``attend_kivi2_g{group}_llama31_8b`` and ``attend_paged_kivi2_g{group}_p256_llama31_8b``
    read KIVI's 2-bit caches (:data:`KIVI_GROUPS`, :data:`KIVI_PAGED_GROUPS`)."""
    v: dict[str, AttendConfig] = {}
    for part, (fmt, scales) in CONTIGUOUS_FORMATS.items():
        v[f"attend_{part}_llama31_8b"] = AttendConfig(**llama, format=fmt, scales=scales)
    v["attend_int4_rotation128_llama31_8b"] = AttendConfig(
        **llama, format="int4", scales=ScalePlace.INLINE, rotation=llama["head_dim"]
    )
    for part, (fmt, scales, size, layout) in PAGED_FORMATS.items():
        v[f"attend_paged_{part}_llama31_8b"] = AttendConfig(
            **llama, cache=CacheLayout.PAGED, format=fmt, scales=scales, page_size=size,
            page_layout=layout,
        )  # fmt: skip
    for group in KIVI_GROUPS:
        v[f"attend_kivi2_g{group}_llama31_8b"] = AttendConfig(
            **llama, format="kivi2", kivi_group=group
        )
    for group in KIVI_PAGED_GROUPS:
        v[f"attend_paged_kivi2_g{group}_p256_llama31_8b"] = AttendConfig(
            **llama, cache=CacheLayout.PAGED, format="kivi2", kivi_group=group, page_size=256
        )
    return v


#: The functions that name the attend family's variants over the catalog's models.
NAMED = (attend_variants,)
