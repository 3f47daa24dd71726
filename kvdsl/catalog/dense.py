"""The catalog's variants of the dense caches' modes (:mod:`kvdsl.kernels.dense`,
``dense_modes``, ``dense_convert``) over the models' shapes."""

from __future__ import annotations

from typing import Any

from kvdsl.catalog.models import Model
from kvdsl.kernels.config import Element, ShiftRegion
from kvdsl.kernels.dense import (
    DenseAppendConfig,
    DenseBuildConfig,
    DenseConfig,
    DenseFormat,
    DenseReadConfig,
    ScalePlace,
)
from kvdsl.kernels.dense_convert import DenseConvertConfig, Source
from kvdsl.kernels.dense_modes import DenseRetainConfig, DenseWindowShiftConfig
from kvdsl.nodes.formats import FORMATS


def dense_variants(models: dict[str, Model]) -> dict[str, DenseConfig]:
    """Named dense variants: at Llama-3.1-8B's shape every format with each place of its
    scales, appended plain and (scales inline) rotated, and read back; at Qwen2.5-0.5B's (head
    dim 64: ggml rows of two blocks) every format's rotary append; one f16-input append;
    int8, int4 and q4_0 appends and an int4 build with K rotated over the whole head."""
    modes = {"append": DenseAppendConfig, "build": DenseBuildConfig, "read": DenseReadConfig}
    rope, qwen3 = {"rotary": True}, "qwen3_06b"  # a family with QK RMSNorm
    v: dict[str, DenseConfig] = {}

    def add(mode: str, tag: str, key: str = "llama31_8b", **fields: Any) -> None:
        v[f"dense_{mode}_{tag}_{key}"] = modes[mode](**models[key].shape, **fields)

    for f in DenseFormat:
        ggml = FORMATS[f.value].ggml
        for place in [ScalePlace.INLINE] if ggml else list(ScalePlace):
            tag = f.value + ("_side" if place is ScalePlace.SIDE else "")
            add("append", tag, format=f, scales=place)
            add("read", tag, format=f, scales=place)
        add("append", f"rotary_{f.value}", format=f, **rope)
        add("append", f"rotary_{f.value}", "qwen25_05b", format=f, **rope)
        add("build", f"rotary_{f.value}", format=f, **rope)
    for f in (DenseFormat.INT8, DenseFormat.Q4_0):
        add("append", f"knorm_rotary_{f.value}", qwen3, format=f, k_norm=True, **rope)
    side = {"scales": ScalePlace.SIDE}
    add("append", "knorm_int4_asym_side", qwen3, format=DenseFormat.INT4_ASYM, **side, k_norm=True)
    # K rotated over the whole head before quantising, beside the unrotated twins above
    whole = models["llama31_8b"].head_dim
    for f in (DenseFormat.INT8, DenseFormat.INT4, DenseFormat.Q4_0):
        add("append", f"rotary_{f.value}_rotation{whole}", format=f, **rope, rotation=whole)
    add("build", f"rotary_int4_rotation{whole}", format=DenseFormat.INT4, **rope, rotation=whole)
    add("build", "int8_side", **side)
    add("build", "knorm_rotary_q8_0", qwen3, format=DenseFormat.Q8_0, k_norm=True, **rope)
    f16_out = {"output_type": Element.F16}
    add("read", "q4_0_f16", format=DenseFormat.Q4_0, **f16_out)
    add("read", "int8_f16", **f16_out)
    add("append", "rotary_q8_0_f16_in", format=DenseFormat.Q8_0, **rope, input_type=Element.F16)
    return v


def dense_modes_variants(models: dict[str, Model]) -> dict[str, DenseConfig]:
    """Named dense cache passes: at Llama-3.1-8B's shape every format with each place of its
    scales (the retain pass, the shift pass and the rotary append pass; ``all`` with rotary
    inline); ``dense_retain`` at Qwen2.5-0.5B's (head dim 64: rows of an odd number of words)
    and ``dense_window_shift`` at Gemma-2-2B's (sliding-window layers, head dim 256), every
    format inline; one f16-input append."""
    v: dict[str, DenseConfig] = {}

    def add(name: str, key: str = "llama31_8b", **fields: Any) -> None:
        cls = DenseRetainConfig if name.startswith("retain") else DenseWindowShiftConfig
        v[f"dense_{name}_{key}"] = cls(**models[key].shape, **fields)

    regions = (ShiftRegion.SHIFT, ShiftRegion.APPEND, ShiftRegion.ALL)
    shift, append, every = ({"region": r} for r in regions)
    for f in DenseFormat:
        if FORMATS[f.value].rotated:
            continue  # its appends are dense_append's; its rows move as any format's
        ggml = FORMATS[f.value].ggml
        for place in [ScalePlace.INLINE] if ggml else list(ScalePlace):
            tag = f.value + ("_side" if place is ScalePlace.SIDE else "")
            fs = {"format": f, "scales": place}
            add(f"retain_{tag}", **fs)
            add(f"window_shift_shift_{tag}", **fs, **shift)
            add(f"window_shift_append_rotary_{tag}", **fs, **append, rotary=True)
        add(f"window_shift_all_rotary_{f.value}", format=f, **every, rotary=True)
        add(f"retain_{f.value}", "qwen25_05b", format=f)
        add(f"window_shift_shift_{f.value}", "gemma2_2b", format=f, **shift)
        add(f"window_shift_all_{f.value}", "gemma2_2b", format=f, **every)
    f16_in = {"input_type": Element.F16}
    add("window_shift_append_q4_0_f16_in", "gemma2_2b", format=DenseFormat.Q4_0, **append, **f16_in)
    return v


def dense_convert_variants(models: dict[str, Model]) -> dict[str, DenseConfig]:
    """Named format-to-format copies: at Llama-3.1-8B's shape f16 rows into every format with
    each place of its scales, f32 into int8, and dense sources into others (int8 → q4_0,
    int8 → int4, q8_0 → q4_0, int4_asym with side scales → int8); at Qwen2.5-0.5B's (head dim
    64) f16 into every format inline."""
    v: dict[str, DenseConfig] = {}
    llama = models["llama31_8b"].shape
    for f in DenseFormat:
        if FORMATS[f.value].rotated:
            continue  # refused: dense_append writes its rows
        ggml = FORMATS[f.value].ggml
        for place in [ScalePlace.INLINE] if ggml else list(ScalePlace):
            tag = f.value + ("_side" if place is ScalePlace.SIDE else "")
            v[f"dense_convert_f16_to_{tag}_llama31_8b"] = DenseConvertConfig(
                **llama, format=f, scales=place
            )
        v[f"dense_convert_f16_to_{f.value}_qwen25_05b"] = DenseConvertConfig(
            **models["qwen25_05b"].shape, format=f
        )
    v["dense_convert_f32_to_int8_llama31_8b"] = DenseConvertConfig(**llama, source=Source.F32)
    for src, dst in (("int8", "q4_0"), ("int8", "int4"), ("q8_0", "q4_0")):
        v[f"dense_convert_{src}_to_{dst}_llama31_8b"] = DenseConvertConfig(
            **llama, source=src, format=dst
        )
    v["dense_convert_int4_asym_side_to_int8_llama31_8b"] = DenseConvertConfig(
        **llama, source=Source.INT4_ASYM, source_scales=ScalePlace.SIDE
    )
    return v


#: The functions that name the dense family's variants over the catalog's models.
NAMED = (
    dense_variants,
    dense_modes_variants,
    dense_convert_variants,
)
