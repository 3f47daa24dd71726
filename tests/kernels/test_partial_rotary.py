"""Partial rotary (``rotary_half`` < ``head_dim / 2``: Phi-2, GPT-NeoX, StableLM) in every mode
that rotates and every walk it has, on the interpreter against the reference and on the GPU
against the interpreter (the harness's random cases, outputs poisoned).

Halves: the whole head (unset), a partial half that divides by 4 (vector walks) and one that
does not (the walks fall back to scalars). Every kernel here binds at most WebGPU's default 8
storage buffers (the quantising kernels with rotary and window_shift 'all' with rotary bind the
packed ``rotary_table``, of ``rotary_half`` cos then ``rotary_half`` sin values a position).
Invalid halves, and the
explicit walks that cannot rotate part of a row, are refused naming the field, the value and
what is allowed.
"""

from __future__ import annotations

import functools

import pytest

from kvdsl import catalog
from kvdsl.harness import verify_variant
from kvdsl.ir.features import limits
from kvdsl.kernels.build import BuildConfig
from kvdsl.contract.modes import sizes as contract_sizes
from kvdsl.kernels.config import ConfigError, Walk, as_dict, from_dict
from kvdsl.kernels.dense import DenseAppendConfig, DenseBuildConfig
from kvdsl.kernels.merge_share import MergeShareConfig
from kvdsl.kernels.quant import AppendQuantConfig, BuildQuantConfig
from kvdsl.kernels.window_shift import WindowShiftConfig
from kvdsl.nodes import walks

# (kv_heads, head_dim, rotary_half): whole head, partial with a multiple of 4, partial without.
SHAPES = {"whole": (2, 16, None), "part4": (2, 20, 4), "part6": (1, 20, 6), "part3": (1, 10, 3)}
F16 = {"present_type": "f16", "input_type": "f16"}


def _configs() -> dict:
    out = {}
    for key, (h, d, half) in SHAPES.items():
        r = {"rotary": True, "rotary_half": half}
        for walk in ("per_row", "flat"):
            out[f"build_{walk}_{key}"] = BuildConfig(h, d, walk=walk, **r)
            # workgroup_size: a multiple of every shape's vectors per row (the flat K RMSNorm).
            knorm = {"k_norm": True, "workgroup_size": 60}
            out[f"build_knorm_{walk}_{key}"] = BuildConfig(h, d, walk=walk, **knorm, **r)
            out[f"build_f16_{walk}_{key}"] = BuildConfig(h, d, walk=walk, **F16, **r)
            for bits in (8, 4):
                if bits == 4 and walk == "flat" and walks.lanes(d, True, half) == 1:
                    continue  # refused: see test_flat_int4_needs_vectors
                q = {"bits": bits, "walk": walk}
                out[f"build_quant_int{bits}_{walk}_{key}"] = BuildQuantConfig(h, d, **q, **r)
                out[f"build_quant_int{bits}_knorm_{walk}_{key}"] = BuildQuantConfig(
                    h, d, **q, **knorm, **r
                )
                out[f"append_quant_int{bits}_{walk}_{key}"] = AppendQuantConfig(h, d, **q, **r)
            for region in ("append", "all"):
                out[f"window_shift_{region}_{walk}_{key}"] = WindowShiftConfig(
                    h, d, region, walk=walk, **r
                )
                out[f"window_shift_{region}_f16_{walk}_{key}"] = WindowShiftConfig(
                    h, d, region, walk=walk, **F16, **r
                )
        for walk in ("cooperative", "per_row", "hybrid", "flat"):
            out[f"merge_share_{walk}_{key}"] = MergeShareConfig(h, d, "append", walk=walk, **r)
            out[f"merge_share_f16_{walk}_{key}"] = MergeShareConfig(
                h, d, "append", walk=walk, **F16, **r
            )
    # K RMSNorm summed across the subgroup: rows of a power-of-two number of vectors (or scalars).
    for key, half in (("whole", None), ("part4", 4), ("part6", 6)):
        r = {"rotary": True, "rotary_half": half, "k_norm": True, "reduction": "subgroup"}
        for walk in ("per_row", "flat"):
            out[f"build_knorm_sg_{walk}_{key}"] = BuildConfig(2, 16, walk=walk, **r)
            q = {"walk": walk}
            out[f"build_quant_int8_knorm_sg_{walk}_{key}"] = BuildQuantConfig(2, 16, **q, **r)
            # int4 rows walk in blocks only as vectors (scalar rows keep the per-row program).
            bits = 4 if walks.lanes(16, True, half) == 4 else 8
            out[f"append_quant_int{bits}_knorm_sg_{walk}_{key}"] = AppendQuantConfig(
                2, 16, bits=bits, **q, **r
            )
    # Windowed kernels (the flat walk on a window of whole slices): the tables read at the
    # row's global position.
    for key in ("part4", "part6"):
        h, d, half = SHAPES[key]
        r = {"rotary": True, "rotary_half": half, "walk": "flat", "window": True}
        out[f"build_windowed_{key}"] = BuildConfig(h, d, **r)
        out[f"build_knorm_windowed_{key}"] = BuildConfig(h, d, k_norm=True, workgroup_size=60, **r)
        out[f"build_quant_int8_windowed_{key}"] = BuildQuantConfig(h, d, **r)
        out[f"append_quant_int8_windowed_{key}"] = AppendQuantConfig(h, d, **r)
        out[f"merge_share_windowed_{key}"] = MergeShareConfig(h, d, "append", **r)
        for region in ("append", "all"):
            out[f"window_shift_{region}_windowed_{key}"] = WindowShiftConfig(h, d, region, **r)
    # The template's bindings (cos_cache and sin_cache, k_scale and v_scale: 9 or 10 storage
    # buffers), on a device requested with the limit the kernel states.
    for key in ("part4", "part6"):
        h, d, half = SHAPES[key]
        r = {"rotary": True, "rotary_half": half, "bindings": "template"}
        for walk in ("per_row", "flat"):
            out[f"build_quant_int8_knorm_template_{walk}_{key}"] = BuildQuantConfig(
                h, d, walk=walk, k_norm=True, workgroup_size=60, **r
            )
            out[f"append_quant_int8_template_{walk}_{key}"] = AppendQuantConfig(
                h, d, walk=walk, **r
            )
    return out


CONFIGS = _configs()


@functools.lru_cache(maxsize=None)
def _kernel(name: str):
    return catalog.build_config(CONFIGS[name], name)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_partial_rotary_matches_reference(name):
    cfg = CONFIGS[name]
    kernel = _kernel(name)
    # Only the template's bindings pass WebGPU's default 8 storage buffers; the runtime requests
    # the limit the kernel states of its device.
    template = getattr(cfg, "bindings", None) == "template" and len(kernel.bindings) > 8
    need = {"maxStorageBuffersPerShaderStage": len(kernel.bindings)} if template else {}
    assert limits(kernel) == need
    res = verify_variant(name, cfg, kernel, n_cases=3, backends=("interp", "gpu"))
    assert res.unsupported is None, res.unsupported
    assert res.ok, res.problems[:3]


def test_vector_walks_take_vectors_where_the_half_allows():
    """A half that divides by 4 keeps vec4; one that does not walks scalars."""
    assert MergeShareConfig(2, 20, "append", rotary=True, rotary_half=4).width == 4
    assert MergeShareConfig(2, 20, "append", rotary=True, rotary_half=6).width == 1
    assert MergeShareConfig(2, 20, "append", rotary=True).width == 1  # half 10
    assert MergeShareConfig(2, 16, "append", rotary=True).width == 4


def test_default_f16_walk_leaves_pairs_for_partial_rotary():
    """The pair walk (pairs half a row apart) is the f16 default for whole-head rotary only."""
    whole = MergeShareConfig(2, 16, "append", walk="flat", rotary=True, **F16)
    part = MergeShareConfig(2, 16, "append", walk="flat", rotary=True, rotary_half=4, **F16)
    assert whole.plan.uses_pairs and not part.plan.uses_pairs


@pytest.mark.parametrize(
    "kwargs,field,allowed",
    [
        ({"rotary_half": 0}, "rotary_half", "a whole number from 1 to head_dim / 2 = 8"),
        ({"rotary_half": 9}, "rotary_half", "a whole number from 1 to head_dim / 2 = 8"),
        ({"rotary_half": 2.5}, "rotary_half", "a whole number from 1 to head_dim / 2 = 8"),
        ({"rotary_half": True}, "rotary_half", "a whole number from 1 to head_dim / 2 = 8"),
        ({"rotary": False, "rotary_half": 4}, "rotary_half", "unset (None) unless rotary=True"),
        ({"walk": "flat", "pairs": True, "rotary_half": 4}, "pairs", "only over the whole head"),
    ],
)
def test_invalid_half_is_refused(kwargs, field, allowed):
    for make in (
        lambda **k: BuildConfig(2, 16, **k),
        lambda **k: MergeShareConfig(2, 16, "append", **k),
        lambda **k: WindowShiftConfig(2, 16, "append", **k),
        lambda **k: BuildQuantConfig(2, 16, **k),
    ):
        with pytest.raises(ConfigError) as err:
            make(**({"rotary": True} | kwargs))
        assert str(err.value).startswith(f"{field}=")
        assert allowed in str(err.value)
        assert "<class" not in str(err.value)


def test_flat_int4_needs_vectors():
    """The flat int4 walk packs four elements at a time: a half that does not divide by 4 is
    refused there (the per_row walk takes it)."""
    with pytest.raises(ConfigError, match=r"rotary_half=6: .*multiple of 4 for the flat int4"):
        BuildQuantConfig(1, 20, bits=4, walk=Walk.FLAT, rotary=True, rotary_half=6)
    assert BuildQuantConfig(1, 20, bits=4, rotary=True, rotary_half=6).rotary_half == 6


@pytest.mark.parametrize("config", [DenseAppendConfig, DenseBuildConfig])
def test_dense_modes_publish_the_half(config):
    """A dense mode's half comes from a JSON config as any rotating mode's does, is published
    as set (unset over the whole head), and sizes the rotary tables."""
    fields = {"kv_heads": 2, "head_dim": 16, "format": "int8", "rotary": True, "rotary_half": 4}
    part = from_dict(config, fields)
    assert as_dict(part)["rotary_half"] == 4 and part.partial
    sizes = contract_sizes(part)
    assert sizes["cos_cache"] == sizes["sin_cache"] == ("positions", 4)
    whole = config(2, 16, format="int8", rotary=True)
    assert as_dict(whole)["rotary_half"] is None and not whole.partial
    sizes = contract_sizes(whole)
    assert sizes["cos_cache"] == sizes["sin_cache"] == ("positions", 8)


@pytest.mark.parametrize("name", sorted(n for n in CONFIGS if not n.endswith("_whole")))
def test_contract_sizes_tables_by_the_half(name):
    """index.json's rotary tables hold the config's half (not head_dim / 2) a position."""
    cfg = CONFIGS[name]
    sizes = contract_sizes(cfg)
    assert sizes["cos_cache"] == sizes["sin_cache"] == ("positions", cfg.rotary_half)
