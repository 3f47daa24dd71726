"""The catalog's variants of the template's modes (:mod:`kvdsl.kernels.transpose`, ``copy``,
``merge``, ``merge_share``, ``window_shift``, ``build``, ``quant``) over the models' shapes."""

from __future__ import annotations

from typing import Any

from kvdsl.catalog.models import Model, partial_rotary
from kvdsl.kernels.build import BuildConfig
from kvdsl.kernels.config import (
    Bindings,
    Bits,
    Element,
    KernelConfig,
    Reduction,
    ShareRegion,
    ShiftRegion,
    Walk,
)
from kvdsl.kernels.copy import CopyConfig
from kvdsl.kernels.merge import MergeConfig
from kvdsl.kernels.merge_share import MergeShareConfig
from kvdsl.kernels.quant import AppendQuantConfig, BuildQuantConfig, QuantConfig
from kvdsl.kernels.transpose import TransposeConfig
from kvdsl.kernels.window_shift import WindowShiftConfig
from kvdsl.nodes import walks


def drop_in_variants(models: dict[str, Model]) -> dict[str, KernelConfig]:
    """The template's own variants (transpose and copy, as its drop-ins) over every model, and
    at Llama 3.1 8B's shape in f16 and over quantised caches' words."""
    v: dict[str, KernelConfig] = {}
    for key, m in models.items():
        v[f"transpose_{key}"] = TransposeConfig(**m.shape)
        v[f"transpose_vec4_{key}"] = TransposeConfig(**m.shape, vec4=True)
        v[f"copy_{key}"] = CopyConfig(head_dim=m.head_dim)
        v[f"copy_per_row_{key}"] = CopyConfig(head_dim=m.head_dim, walk=Walk.PER_ROW)
    llama = models["llama31_8b"].shape
    v["transpose_f16_llama31_8b"] = TransposeConfig(**llama, present_type=Element.F16)
    v["transpose_vec4_f16_llama31_8b"] = TransposeConfig(
        **llama, vec4=True, present_type=Element.F16
    )
    v["copy_f16_llama31_8b"] = CopyConfig(head_dim=128, present_type=Element.F16)
    # An int8-quantised cache stores one i32 word per element; packed int4 stores headDim/2 u32.
    v["copy_int8_llama31_8b"] = CopyConfig(head_dim=128, present_type=Element.I32)
    v["copy_int4_per_row_llama31_8b"] = CopyConfig(
        head_dim=64, walk=Walk.PER_ROW, present_type=Element.U32
    )
    return v


def transpose_variants(models: dict[str, Model]) -> dict[str, TransposeConfig]:
    """Flat transposes at workgroup size 256 (the drop-in ones are named in
    :mod:`kvdsl.catalog`): a workgroup of the template's 64 keeps too few loads in flight."""
    v: dict[str, TransposeConfig] = {}
    for key, m in models.items():
        vec4 = m.head_dim % 4 == 0
        v[f"transpose_flat_{key}"] = TransposeConfig(**m.shape, vec4=vec4, workgroup_size=256)
    for key in ("qwen25_05b", "llama31_8b"):
        v[f"transpose_windowed_{key}"] = TransposeConfig(
            **models[key].shape, vec4=True, workgroup_size=256, window=True
        )
    v["transpose_flat_f16_llama31_8b"] = TransposeConfig(
        **models["llama31_8b"].shape,
        vec4=True,
        present_type=Element.F16,
        workgroup_size=256,
        words=True,
    )
    return v


def copy_variants(models: dict[str, Model]) -> dict[str, CopyConfig]:
    """The flat copy variants (the drop-in ones are named in :mod:`kvdsl.catalog`)."""
    v: dict[str, CopyConfig] = {}
    for key, m in models.items():
        v[f"copy_flat_{key}"] = CopyConfig(head_dim=m.head_dim, walk=Walk.FLAT)
    flat = {"walk": Walk.FLAT}
    v["copy_flat_f16_llama31_8b"] = CopyConfig(head_dim=128, present_type=Element.F16, **flat)
    v["copy_flat_int8_llama31_8b"] = CopyConfig(head_dim=128, present_type=Element.I32, **flat)
    # A packed int4 row of head dim 128 is 64 u32 words.
    v["copy_flat_int4_llama31_8b"] = CopyConfig(head_dim=64, present_type=Element.U32, **flat)
    return v


def merge_variants(models: dict[str, Model]) -> dict[str, MergeConfig]:
    """Named merge variants over a few model shapes, every walk and element type."""
    v: dict[str, MergeConfig] = {}
    for key in ("qwen25_05b", "llama31_8b", "phi3_mini", "gemma2_2b"):
        shape = models[key].shape
        v[f"merge_{key}"] = MergeConfig(**shape)
        v[f"merge_per_row_{key}"] = MergeConfig(**shape, walk=Walk.PER_ROW)
        v[f"merge_flat_{key}"] = MergeConfig(**shape, walk=Walk.FLAT)
    shape = models["llama31_8b"].shape
    f16 = {"present_type": Element.F16, "input_type": Element.F16}
    v["merge_f16_llama31_8b"] = MergeConfig(**shape, **f16)
    v["merge_per_row_f16_llama31_8b"] = MergeConfig(**shape, walk=Walk.PER_ROW, **f16)
    v["merge_flat_f16_llama31_8b"] = MergeConfig(**shape, walk=Walk.FLAT, **f16)
    v["merge_f32_to_f16_llama31_8b"] = MergeConfig(**shape, present_type=Element.F16)
    for key in ("qwen25_05b", "llama31_8b"):
        shape = models[key].shape
        v[f"merge_windowed_{key}"] = MergeConfig(**shape, walk=Walk.FLAT, window=True)
    return v


def merge_share_variants(models: dict[str, Model]) -> dict[str, MergeShareConfig]:
    """Named merge_share passes: both regions, every walk, rotary on and off, f16."""
    retain, append = {"region": ShareRegion.RETAIN}, {"region": ShareRegion.APPEND}
    flat, per_row, hybrid = ({"walk": w} for w in (Walk.FLAT, Walk.PER_ROW, Walk.HYBRID))
    rope, windowed = {"rotary": True}, {"walk": Walk.FLAT, "window": True}
    f16 = {"present_type": Element.F16, "input_type": Element.F16}
    v: dict[str, MergeShareConfig] = {}

    def add(tag: str, key: str, **fields: Any) -> None:
        v[f"merge_share_{tag}_{key}"] = MergeShareConfig(**models[key].shape, **fields)

    for key in ("qwen25_05b", "llama31_8b", "gemma3_1b"):
        add("retain", key, **retain)
        add("retain_per_row", key, **retain, **per_row)
        add("retain_flat", key, **retain, **flat)
        add("append", key, **append)
        add("append_rotary", key, **append, **rope)
        add("append_flat", key, **append, **flat)
        add("append_rotary_flat", key, **append, **flat, **rope)
        if key != "gemma3_1b":
            add("append_rotary_hybrid", key, **append, **hybrid, **rope)
    key = "llama31_8b"
    add("append_per_row", key, **append, **per_row)
    add("append_rotary_per_row", key, **append, **per_row, **rope)
    add("append_hybrid", key, **append, **hybrid)
    add("retain_f16", key, **retain, **f16)
    add("append_rotary_f16", key, **append, **rope, **f16)
    add("retain_flat_f16", key, **retain, **flat, **f16)
    add("append_rotary_flat_f16", key, **append, **flat, **rope, **f16)
    add("append_rotary_per_row_f16", key, **append, **per_row, **rope, **f16)
    for key, m in partial_rotary(models).items():
        add("append_rotary", key, **append, **m.rotary)
        for name, walk in (("flat", flat), ("hybrid", hybrid), ("per_row", per_row)):
            add(f"append_rotary_{name}", key, **append, **walk, **m.rotary)
        add("append_rotary_f16", key, **append, **m.rotary, **f16)
        add("append_rotary_flat_f16", key, **append, **flat, **m.rotary, **f16)
    for key in ("qwen25_05b", "llama31_8b"):
        add("retain_windowed", key, **retain, **windowed)
        add("append_rotary_windowed", key, **append, **rope, **windowed)
    add("append_windowed", "llama31_8b", **append, **windowed)
    return v


def window_shift_variants(models: dict[str, Model]) -> dict[str, WindowShiftConfig]:
    """Named window_shift passes over the sliding-window model shapes and Llama."""
    shift, append = {"region": ShiftRegion.SHIFT}, {"region": ShiftRegion.APPEND}
    flat, rope, windowed = (
        {"walk": Walk.FLAT},
        {"rotary": True},
        {"walk": Walk.FLAT, "window": True},
    )
    f16 = {"present_type": Element.F16, "input_type": Element.F16}
    v: dict[str, WindowShiftConfig] = {}

    def add(tag: str, key: str, **fields: Any) -> None:
        v[f"window_shift{tag}_{key}"] = WindowShiftConfig(**models[key].shape, **fields)

    for key in ("gemma2_2b", "gemma3_1b", "llama31_8b"):
        for walk, w in (("", {}), ("_flat", flat)):
            add(walk, key, **w)
            add(f"_shift{walk}", key, **shift, **w)
            add(f"_append_rotary{walk}", key, **append, **rope, **w)
    key = "gemma2_2b"
    add("_append", key, **append)
    add("_f16", key, **f16)
    add("_shift_f16", key, **shift, **f16)
    add("_append_rotary_f16", key, **append, **rope, **f16)
    add("_append_flat", key, **append, **flat)
    add("_flat_f16", key, **flat, **f16)
    add("_append_rotary_flat_f16", key, **append, **rope, **flat, **f16)
    for key, m in partial_rotary(models).items():
        add("_append_rotary", key, **append, **m.rotary)
        add("_append_rotary_flat", key, **append, **m.rotary, **flat)
        add("_append_rotary_flat_f16", key, **append, **m.rotary, **flat, **f16)
    for key in ("gemma2_2b", "llama31_8b"):
        add("_windowed", key, **windowed)
        add("_shift_windowed", key, **shift, **windowed)
        add("_append_rotary_windowed", key, **append, **rope, **windowed)
    return v


def build_variants(models: dict[str, Model]) -> dict[str, BuildConfig]:
    """Named ``build`` variants over ``models`` (catalog keys → :class:`Model`)."""
    flat, sg = {"walk": Walk.FLAT}, {"reduction": Reduction.SUBGROUP}
    norm, rope, windowed = {"k_norm": True}, {"rotary": True}, {"walk": Walk.FLAT, "window": True}
    f16_out, f16_in = {"present_type": Element.F16}, {"input_type": Element.F16}
    v: dict[str, BuildConfig] = {}

    def add(tag: str, key: str, **fields: Any) -> None:
        v[f"build{tag}_{key}"] = BuildConfig(**models[key].shape, **fields)

    for key, m in models.items():
        for walk, w in (("", {}), ("_flat", flat)):
            add(walk, key, **w)
            add(f"_rotary{walk}", key, **m.rotary, **w)
    for key in ("qwen3_06b", "gemma3_1b"):  # the families with QK RMSNorm
        for rotary, r in (("", {}), ("_rotary", rope)):
            for walk, w in (("", {}), ("_flat", flat), ("_flat_sg", flat | sg), ("_sg", sg)):
                add(f"_knorm{rotary}{walk}", key, **norm, **r, **w)
    add("_rotary_f16", "llama31_8b", **rope, **f16_out)
    add("_rotary_f16_in", "llama31_8b", **rope, **f16_in, **f16_out)
    add("_rotary_flat_f16", "llama31_8b", **rope, **f16_out, **flat)
    add("_rotary_flat_f16_in", "llama31_8b", **rope, **f16_in, **f16_out, **flat)
    for key, m in partial_rotary(models).items():  # the rotary's f16 forms
        add("_rotary_f16", key, **m.rotary, **f16_out)
        add("_rotary_flat_f16_in", key, **m.rotary, **f16_in, **f16_out, **flat)
    for key in ("qwen25_05b", "llama31_8b"):
        add("_rotary_windowed", key, **rope, **windowed)
    add("_knorm_rotary_windowed", "qwen3_06b", **norm, **rope, **windowed)
    return v


def quant_variants(models: dict[str, Model]) -> dict[str, QuantConfig]:
    """Named ``build_quant`` / ``append_quant`` variants over ``models``.

    K RMSNorm with rotary, and rotary in ``append_quant``, bind the packed bindings (within
    WebGPU's default 8 storage buffers, :func:`storage_buffers`); ``*_template_bindings_*`` are
    their drop-ins with the template's 9 or 10, for a device that allows that many.
    """
    flat, sg = {"walk": Walk.FLAT}, {"reduction": Reduction.SUBGROUP}
    norm, rope = {"k_norm": True}, {"rotary": True}
    windowed = {"walk": Walk.FLAT, "window": True}
    build, append = ("build", BuildQuantConfig), ("append", AppendQuantConfig)
    v: dict[str, QuantConfig] = {}

    def add(tag: str, key: str, modes: tuple = (build, append), **fields: Any) -> None:
        for mode, cls in modes:
            v[f"{mode}_quant_{tag}_{key}"] = cls(**models[key].shape, **fields)

    for bits in Bits:
        b = {"bits": bits}
        for key in ("qwen25_05b", "llama31_8b", "phi3_mini", "gemma2_2b"):
            add(f"int{bits}", key, **b)
            add(f"int{bits}_flat", key, **b, **flat)
        add(f"int{bits}_rotary", "llama31_8b", (build,), **b, **rope)
        add(f"int{bits}_rotary_flat", "llama31_8b", (build,), **b, **rope, **flat)
        for key in ("qwen3_06b", "gemma3_1b"):  # the families with QK RMSNorm
            for tag, more in (("", {}), ("_flat", flat), ("_flat_sg", flat | sg), ("_sg", sg)):
                add(f"int{bits}_knorm{tag}", key, **b, **norm, **more)
        for key, m in partial_rotary(models).items():
            add(f"int{bits}_rotary", key, **b, **m.rotary)
            # The flat int4 walk packs vectors: a half that does not divide by 4 has none.
            if bits is Bits.INT8 or walks.lanes(m.head_dim, True, m.half) == 4:
                add(f"int{bits}_rotary_flat", key, **b, **m.rotary, **flat)
        for walk, w in (("", {}), ("_flat", flat)):
            add(f"int{bits}_rotary{walk}", "llama31_8b", (append,), **b, **rope, **w)
            for red, r in (("", {}), ("_sg", sg)):
                add(
                    f"int{bits}_knorm_rotary{walk}{red}", "qwen3_06b", **b, **norm, **rope, **w, **r
                )
        add(f"int{bits}_windowed", "llama31_8b", **b, **windowed)
    template = {"bindings": Bindings.TEMPLATE}
    for red, r in (("", {}), ("_sg", sg)):
        add(
            f"int8_knorm_rotary_template_bindings{red}",
            "qwen3_06b",
            **norm,
            **rope,
            **template,
            **r,
        )
    f16_in = {"input_type": Element.F16}
    add("int8_f16_in", "llama31_8b", (build,), **f16_in)
    add("int8_flat_f16_in", "llama31_8b", (build,), **f16_in, **flat)
    add("int8_symmetric", "llama31_8b", (append,), qmin=-127, qmax=127)
    add("int8_knorm_windowed", "qwen3_06b", (build,), **norm, **windowed)
    # Rotary in append_quant, and K RMSNorm with rotary, bind the packed bindings windowed too.
    add("int8_rotary_windowed", "llama31_8b", (append,), **rope, **windowed)
    add("int8_knorm_rotary_windowed", "qwen3_06b", **norm, **rope, **windowed)
    return v


#: The functions that name the template family's variants over the catalog's models.
NAMED = (
    drop_in_variants,
    transpose_variants,
    copy_variants,
    merge_variants,
    merge_share_variants,
    window_shift_variants,
    build_variants,
    quant_variants,
)
