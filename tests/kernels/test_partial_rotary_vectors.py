"""Partial rotary (``rotary_half`` < ``head_dim / 2``) in the modes whose walks hold rows as
``vec4`` (the dense quantiser's lanes and the fused kernels): ``dense_append`` and
``dense_build`` in every format, ``dense_window_shift``'s appending regions, ``paged_append`` (f32, f16 and dense pages, K RMSNorm), ``qkv``
and ``paged_qkv`` (f32 rows and dense formats), on the interpreter against the reference and on
the GPU against the interpreter (the harness's random cases, outputs poisoned); the dims past
the rotated part pass through as loaded; a half that is not a whole number of ``vec4`` is
refused naming the field.
"""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import catalog, interp
from kvdsl.harness import verify_variant
from kvdsl.harness.cases import cases_for
from kvdsl.kernels.config import ConfigError
from kvdsl.kernels.dense import DenseAppendConfig, DenseBuildConfig
from kvdsl.kernels.dense_modes import DenseWindowShiftConfig
from kvdsl.kernels.paged import PagedAppendConfig
from kvdsl.kernels.qkv import QkvConfig
from kvdsl.kernels.qkv_paged import PagedQkvConfig
from kvdsl.reference import formats as fm

F32 = np.float32
FORMATS = ("int8", "int4", "int4_asym", "q8_0", "q4_0")


def _configs() -> dict:
    out: dict = {}
    for half in (4, 8):
        r = {"rotary": True, "rotary_half": half}
        for f in FORMATS:
            out[f"dense_append_{f}_h{half}"] = DenseAppendConfig(2, 32, format=f, **r)
            out[f"dense_build_{f}_h{half}"] = DenseBuildConfig(2, 32, format=f, **r)
        out[f"dense_append_int8_knorm_h{half}"] = DenseAppendConfig(
            2, 32, format="int8", k_norm=True, **r
        )
        out[f"dense_append_int4_side_joint_h{half}"] = DenseAppendConfig(
            2, 32, format="int4", scales="side", split=False, **r
        )
        out[f"dense_build_q4_0_knorm_f16_in_h{half}"] = DenseBuildConfig(
            2, 32, format="q4_0", k_norm=True, input_type="f16", **r
        )
        for region in ("append", "all"):
            for f in ("int8", "q4_0"):
                out[f"dense_window_shift_{region}_{f}_h{half}"] = DenseWindowShiftConfig(
                    2, 32, format=f, region=region, **r
                )
        out[f"paged_append_f32_h{half}"] = PagedAppendConfig(2, 32, **r)
        out[f"paged_append_f16_table_h{half}"] = PagedAppendConfig(
            2, 32, format="f16", addressing="page_table", **r
        )
        out[f"paged_append_knorm_combined_h{half}"] = PagedAppendConfig(
            2, 32, pool="combined", addressing="page_table", k_norm=True, **r
        )
        out[f"paged_append_int8_h{half}"] = PagedAppendConfig(2, 32, format="int8", **r)
        out[f"paged_append_q4_0_table_h{half}"] = PagedAppendConfig(
            2, 32, format="q4_0", addressing="page_table", **r
        )
        qkv = {"q_heads": 4, **r}
        out[f"qkv_int8_h{half}"] = QkvConfig(2, 32, format="int8", **qkv)
        out[f"qkv_q8_0_norms_h{half}"] = QkvConfig(
            2, 32, format="q8_0", q_norm=True, k_norm=True, **qkv
        )
        out[f"qkv_int4_side_joint_h{half}"] = QkvConfig(
            2, 32, format="int4", scales="side", split=False, **qkv
        )
        out[f"qkv_q4_0_staged_h{half}"] = QkvConfig(
            2, 32, format="q4_0", k_norm=True, pair_loads=False, **qkv
        )
        out[f"paged_qkv_f32_h{half}"] = PagedQkvConfig(2, 32, **qkv)
        out[f"paged_qkv_int8_table_h{half}"] = PagedQkvConfig(
            2, 32, format="int8", addressing="page_table", k_norm=True, **qkv
        )
    return out


CONFIGS = _configs()


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_partial_rotary_matches_reference(name):
    """Every config, on the interpreter against the reference and on the GPU against it."""
    assert CONFIGS[name].partial
    kernel = catalog.build_config(CONFIGS[name], name)
    res = verify_variant(name, CONFIGS[name], kernel, n_cases=3, backends=("interp", "gpu"))
    assert res.unsupported is None and res.ok, res.unsupported or res.problems[:3]


def _rotated_by_hand(k: np.ndarray, pos: np.ndarray, cos: np.ndarray, sin: np.ndarray, half: int):
    """NeoX rotary of the first ``2 * half`` dims of ``k`` ``[..., D]`` at ``pos``, written out
    (not the reference's), the rest left as they are."""
    c, s = cos.reshape(-1, half)[pos], sin.reshape(-1, half)[pos]
    x0, x1 = k[..., :half], k[..., half : 2 * half]
    head = np.concatenate([x0 * c - x1 * s, x1 * c + x0 * s], axis=-1)
    return np.concatenate([head, k[..., 2 * half :]], axis=-1).astype(F32)


@pytest.mark.parametrize("fmt", ["int8", "q4_0"])
def test_dense_build_stores_the_tail_unrotated(fmt):
    """``dense_build`` stores the rows rotated by hand in their first ``2 * half`` dims and
    loaded in the rest, quantised by the reference (no rotary of its own)."""
    h, d, half, b, s, past = 2, 32, 4, 2, 5, 3
    cfg = DenseBuildConfig(h, d, format=fmt, rotary=True, rotary_half=half)
    rng = np.random.default_rng(7)
    sign = rng.choice([-1.0, 1.0], (b, s, h * d))
    new_k = (rng.uniform(0.5, 2.0, (b, s, h * d)) * sign).astype(F32)
    new_v = rng.uniform(0.5, 2.0, (b, s, h * d)).astype(F32)
    theta = rng.uniform(0, 6.3, (past + s, half))
    cos, sin = np.cos(theta).astype(F32), np.sin(theta).astype(F32)
    pos = (past + np.arange(s))[None, :, None]
    k = _rotated_by_hand(new_k.reshape(b, s, h, d), pos, cos, sin, half).reshape(b, s, h * d)
    wk, wv, _ = fm.dense_build(k, new_v, h, cfg.fmt)
    bufs = {
        "src_k": new_k.reshape(-1),
        "src_v": new_v.reshape(-1),
        "cos_cache": cos.reshape(-1),
        "sin_cache": sin.reshape(-1),
        "present_key": np.full(wk.size, 0xFFFFFFFF, np.uint32),
        "present_value": np.full(wk.size, 0xFFFFFFFF, np.uint32),
    }
    out = interp.run(_kernel_of(cfg), bufs, {"count": b * h * s, "seq": s, "pastSeq": past})
    np.testing.assert_array_equal(out["present_key"], wk.reshape(-1))
    np.testing.assert_array_equal(out["present_value"], wv.reshape(-1))


def _kernel_of(cfg):
    return catalog.build_config(cfg, cfg.mode)


def _rows_where_written(cfg, name: str):
    """(expected, written mask, input case) of a harness case on the interpreter."""
    case = cases_for(cfg, 1, seed=3)[0]
    bufs = {k: v.copy() for k, v in case.buffers.items()}
    out = interp.run(_kernel_of(cfg), bufs, case.params)
    return case, out


def test_paged_append_stores_the_tail_as_loaded():
    """f32 pages: every stored K row's dims past ``2 * half`` are the source's, bit for bit, and
    its first ``2 * half`` are the reference's rotation."""
    cfg = PagedAppendConfig(2, 32, rotary=True, rotary_half=4)
    case, out = _rows_where_written(cfg, "paged")
    got, want = out["key_pages"], case.expected["key_pages"]
    mask = case.written["key_pages"].reshape(-1, 32)
    got, want = got.reshape(-1, 32)[mask[:, 0]], want.reshape(-1, 32)[mask[:, 0]]
    assert len(got)
    np.testing.assert_array_equal(got[:, 8:], want[:, 8:])
    np.testing.assert_allclose(got[:, :8], want[:, :8], rtol=2e-5, atol=1e-6)
    # The reference's tail is the source's: each stored tail is one of the source rows' tails.
    src = case.buffers["src_k"].reshape(-1, 32)[:, 8:]
    assert {r.tobytes() for r in got[:, 8:]} <= {r.tobytes() for r in src}


def test_qkv_writes_q_tail_as_loaded():
    """A dense-format ``qkv`` writes Q (f32, no norm, no bias) with its dims past ``2 * half``
    as the packed input holds them, and rotates the first ``2 * half``."""
    cfg = QkvConfig(2, 32, q_heads=4, format="int8", rotary=True, rotary_half=8)
    case, out = _rows_where_written(cfg, "qkv")
    x = case.buffers["qkv"].reshape(-1, cfg.heads, 32)  # [tokens, heads, D]
    batch, key_seq = case.shape["batch"], case.shape["keySeq"]
    q_in = x[:, : cfg.q_heads].reshape(batch, key_seq, cfg.q_heads, 32).transpose(0, 2, 1, 3)
    q_out = out["q_out"].reshape(batch, cfg.q_heads, key_seq, 32)
    np.testing.assert_array_equal(q_out[..., 16:], q_in[..., 16:])
    assert not np.array_equal(q_out[..., :16], q_in[..., :16])
    np.testing.assert_allclose(q_out, case.expected["q_out"].reshape(q_out.shape), rtol=2e-5)


@pytest.mark.parametrize(
    "make",
    [
        lambda **r: DenseAppendConfig(2, 32, format="int8", **r),
        lambda **r: DenseBuildConfig(2, 32, format="q8_0", **r),
        lambda **r: DenseWindowShiftConfig(2, 32, region="append", **r),
        lambda **r: PagedAppendConfig(2, 32, **r),
        lambda **r: QkvConfig(2, 32, q_heads=4, **r),
        lambda **r: QkvConfig(2, 32, q_heads=4, format="int8", **r),
    ],
)
def test_half_of_partial_vectors_is_refused(make):
    with pytest.raises(ConfigError) as err:
        make(rotary=True, rotary_half=6)
    assert str(err.value).startswith("rotary_half=6: expected a multiple of 4 for ")
    assert "a rotated vec4 lies in one half of the rotated part" in str(err.value)
