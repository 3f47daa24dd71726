"""The harness's random cases, per mode, against what ``kvdsl/harness`` says they are.

Every mode's generator, for small configs of each option, feeds the interpreter cases it verifies
against the reference (inputs named as the kernel's bindings, params its fields, outputs
poisoned), and each case has the documented shape: batch and token counts from the generator's
table, ``seqlens_k`` of each adversarial kind (right-padded, append in the middle, filled
exactly, past the capacity), per-channel and per-tensor scales, rotary tables exactly as long as
the positions the mode rotates at, and the tolerance each transformed output carries. No GPU.
"""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import catalog
from kvdsl.harness import CASES, cases_for, verify_variant
from kvdsl.harness.cases import dtype
from kvdsl.kernels.build import BuildConfig
from kvdsl.kernels.copy import CopyConfig
from kvdsl.kernels.merge import MergeConfig
from kvdsl.kernels.merge_share import MergeShareConfig
from kvdsl.kernels.quant import AppendQuantConfig, BuildQuantConfig
from kvdsl.kernels.transpose import TransposeConfig
from kvdsl.kernels.window_shift import WindowShiftConfig
from kvdsl.reference.judge import values
from tests.helpers.case_outputs import reference_outputs

CONFIGS = {
    "transpose": TransposeConfig(2, 8),
    "transpose_vec4_f16": TransposeConfig(2, 8, vec4=True, present_type="f16"),
    "copy": CopyConfig(8),
    "copy_u32": CopyConfig(8, present_type="u32"),
    "merge": MergeConfig(2, 8),
    "merge_f16": MergeConfig(2, 8, present_type="f16", input_type="f16"),
    "merge_share_retain": MergeShareConfig(2, 8, "retain"),
    "merge_share_append_rotary": MergeShareConfig(2, 8, "append", rotary=True),
    "merge_share_append_f16": MergeShareConfig(
        2, 8, "append", present_type="f16", input_type="f16"
    ),
    "merge_share_append_rotary_f16": MergeShareConfig(
        2, 8, "append", rotary=True, present_type="f16", input_type="f16"
    ),
    "window_shift_all": WindowShiftConfig(2, 8, "all"),
    "window_shift_shift": WindowShiftConfig(2, 8, "shift"),
    "window_shift_append_rotary": WindowShiftConfig(2, 8, "append", rotary=True),
    "window_shift_append": WindowShiftConfig(2, 8, "append"),
    "build": BuildConfig(2, 8),
    "build_knorm_rotary_f16": BuildConfig(2, 8, k_norm=True, rotary=True, present_type="f16"),
    "build_rotary": BuildConfig(2, 8, rotary=True),
    "build_quant": BuildQuantConfig(2, 8),
    "build_quant_int4_rotary": BuildQuantConfig(2, 8, bits=4, rotary=True),
    "build_quant_knorm": BuildQuantConfig(2, 8, k_norm=True, eps=0.25),
    "build_quant_range": BuildQuantConfig(2, 8, qmin=-20, qmax=30),
    "append_quant": AppendQuantConfig(2, 8),
    "append_quant_int4_knorm": AppendQuantConfig(2, 8, bits=4, k_norm=True),
    "append_quant_rotary": AppendQuantConfig(2, 8, rotary=True, bindings="template"),
    # Partial rotary: tables of rotary_half entries per position.
    "merge_share_append_rotary_partial": MergeShareConfig(
        2, 12, "append", rotary=True, rotary_half=2
    ),
    "window_shift_all_rotary_partial": WindowShiftConfig(2, 12, "all", rotary=True, rotary_half=3),
    "build_rotary_partial": BuildConfig(2, 12, rotary=True, rotary_half=5),
    "append_quant_rotary_partial": AppendQuantConfig(2, 12, rotary=True, rotary_half=4),
}


#: The dense-format modes, whose cases tests/harness/test_dense_cases.py checks.
DENSE = {
    "dense_append",
    "dense_build",
    "dense_read",
    "dense_retain",
    "dense_window_shift",
    "dense_convert",
}
#: KIVI's modes.
KIVI = {"kivi_append", "kivi_flush"}
#: The paged modes, whose cases tests/harness/test_paged_cases.py checks.
PAGED = {"paged_append", "paged_read", "paged_copy", "paged_compact", "paged_window"}
#: The modes whose cases their own test module checks (tests/kernels/test_qkv.py,
#: tests/kernels/test_qkv_paged.py, tests/harness/test_attend_cases.py,
#: tests/kernels/test_kivi_cache.py).
OWN = DENSE | {"qkv", "paged_qkv", "attend", "attend_merge"} | KIVI


def test_every_mode_has_a_generator():
    assert sorted(CASES) == sorted(
        {"transpose", "copy", "merge", "merge_share", "window_shift", "build"}
        | {"build_quant", "append_quant"}
        | DENSE
        | PAGED
        | {"qkv", "paged_qkv", "attend", "attend_merge"}
        | KIVI
    )
    assert {cfg.mode for cfg in CONFIGS.values()} == set(CASES) - OWN - PAGED


@pytest.mark.parametrize("name", CONFIGS)
def test_interpreter_verifies_the_cases(name):
    cfg = CONFIGS[name]
    kernel = catalog.build_config(cfg)
    result = verify_variant(name, cfg, kernel, 4, ("interp",), seed=3)
    assert result.ok, "\n".join(result.problems)
    bindings = {b.name: b for b in kernel.bindings}
    for case in cases_for(cfg, 4, seed=3):
        assert set(case.buffers) == set(bindings)
        assert set(case.params) == {name for name, _ in kernel.params.fields}
        assert set(case.expected) == {"present_key", "present_value"}
        for out in ("present_key", "present_value"):
            buf = case.buffers[out]
            assert buf.ndim == 1 and buf.dtype == case.expected[out].dtype
            assert buf.size == case.expected[out].size
            assert (buf.view(f"u{buf.itemsize}") == 0x7FC0DEAD % (1 << 8 * buf.itemsize)).all() or (
                buf.itemsize == 2 and (buf.view(np.uint16) == 0x7E5A).all()
            )
        for name, b in bindings.items():
            assert case.buffers[name].dtype == b.host.dtype, name
        # The reference's masks say which elements the pass writes; windows write only part.
        if cfg.mode in ("merge_share", "window_shift", "append_quant"):
            assert set(case.written) == {"present_key", "present_value"}
            assert np.array_equal(case.written["present_key"], case.written["present_value"])
            assert case.written["present_key"].shape == case.expected["present_key"].shape
        else:
            assert case.written == {}


@pytest.mark.parametrize("name", CONFIGS)
def test_a_wrong_output_is_caught(name):
    """Each case's own verdict catches one element changed inside the written window."""
    cfg = CONFIGS[name]
    checked = 0
    for case in cases_for(cfg, 3, seed=1):
        out = "present_value"
        window = np.flatnonzero(case.written.get(out, np.ones(case.expected[out].size, bool)))
        if not window.size:  # a retain pass with nothing outside the append window
            continue
        checked += 1
        got = reference_outputs(case)
        assert case.against_reference(got) == []
        i = int(window[0])
        got[out][i] = got[out][i] + got[out].dtype.type(7 if got[out].dtype.kind in "iu" else 0.5)
        assert case.against_reference(got)[0].startswith(f"{case.label()} {out}:")
    assert checked >= 2


# ---- shapes ---------------------------------------------------------------------------------------


def labels(name: str, n: int = 3, seed: int = 0) -> list[str]:
    return [c.label() for c in cases_for(CONFIGS[name], n, seed)]


def test_cases_are_deterministic_in_the_seed():
    a, b = cases_for(CONFIGS["merge_share_retain"], 2, 5), cases_for(
        CONFIGS["merge_share_retain"], 2, 5
    )
    for x, y in zip(a, b):
        assert x.label() == y.label()
        for k in x.buffers:
            assert np.array_equal(x.buffers[k].view(np.uint8), y.buffers[k].view(np.uint8))
    c = cases_for(CONFIGS["merge_share_retain"], 2, 6)
    assert not np.array_equal(a[0].buffers["seqlens_k"], c[0].buffers["seqlens_k"]) or not (
        np.array_equal(a[0].buffers["past_k"], c[0].buffers["past_k"])
    )
    assert labels("copy", 3, 0) == ["rows=1", "rows=49", "rows=339"]


def test_transpose_shapes():
    cfg = CONFIGS["transpose"]
    seen = set()
    for i, case in enumerate(cases_for(cfg, 300)):
        batch, seq = case.shape["batch"], case.shape["kvSeq"]
        assert batch == 1 + i % 3 and case.params == {"batchSize": batch, "kvSeq": seq}
        assert [seq == 1, 2 <= seq < 40, 40 <= seq < 80][i % 3], (i, seq)
        seen.add(seq)
        assert case.buffers["key"].size == batch * seq * 16
    assert 2 in seen


def test_copy_shapes():
    seen = set()
    for i, case in enumerate(cases_for(CONFIGS["copy"], 300)):
        rows = case.shape["rows"]
        assert case.params == {"count": rows} and case.buffers["src_k"].size == rows * 8
        assert [rows == 1, 2 <= rows < 64, 200 <= rows < 400][i % 3], (i, rows)
        seen.add(rows)
    assert {2, 200} <= seen


def test_merge_shapes():
    for i, case in enumerate(cases_for(CONFIGS["merge"], 6)):
        past, new = [(0, 3), (17, 1), (40, 9)][i % 3]
        batch = 1 + i % 2
        assert case.shape == {"batch": batch, "pastSeq": past, "keySeq": new}
        seq = past + new
        assert case.params == {"count": batch * 2 * seq, "seq": seq, "pastSeq": past, "keySeq": new}
        assert case.buffers["past_k"].size == batch * 2 * past * 8
        assert case.buffers["new_v"].size == batch * new * 16
        assert case.tolerance == {} and case.quantized == {} and case.codes == {}


WINDOWED = {
    "merge_share_retain": [(24, 5), (9, 1), (40, 40)],
    "merge_share_append_rotary": [(24, 5), (9, 1), (40, 40)],
    "window_shift_all": [(16, 5), (8, 1), (12, 12)],
    "window_shift_shift": [(16, 5), (8, 1), (12, 12)],
    "window_shift_append_rotary": [(16, 5), (8, 1), (12, 12)],
    "append_quant": [(20, 4), (9, 1), (12, 12)],
}


def seqlens_kind(s: int, key_seq: int, cap: int, kind: int) -> bool:
    """``seqlens_k`` of the adversarial ``kind`` (``adversarial_seqlens``'s order)."""
    return [
        -1 <= s < key_seq - 1,  # right-padded first prompt (or empty)
        key_seq - 1 <= s <= cap - 1,  # append in the middle
        s == cap - 1,  # fills the cache exactly
        cap - 1 <= s <= 2 * cap,  # more than the capacity
    ][kind]


@pytest.mark.parametrize("name", WINDOWED)
def test_windowed_shapes_and_seqlens(name):
    cfg, sizes = CONFIGS[name], WINDOWED[name]
    ends = set()
    for i, case in enumerate(cases_for(cfg, 120)):
        cap, key_seq = sizes[i % 3]
        batch = 2 + i % 2
        seqlens = case.buffers["seqlens_k"]
        # The rotary tables' rows: the cache's capacity, or (window_shift) the newest position.
        positions = int(seqlens.max()) + key_seq + 1 if cfg.mode == "window_shift" else cap
        rotary = {"positions": positions} if "cos_cache" in case.buffers else {}
        assert case.buffers.get("cos_cache", np.zeros(0)).size == len(rotary) * positions * (
            cfg.head_dim // 2
        )
        if cfg.mode == "append_quant":
            assert (
                case.shape
                == {
                    "batch": batch,
                    "seq": key_seq,
                    "totalSeq": cap,
                    "perChannel": i % 2,
                }
                | rotary
            )
            assert case.params == {
                "count": batch * 2 * key_seq,
                "seq": key_seq,
                "pastSeq": 0,
                "totalSeq": cap,
                "perChannel": i % 2,
            }
        else:
            rows = key_seq if getattr(cfg, "region", None) == "append" else cap
            assert case.shape == {"batch": batch, "seq": cap, "keySeq": key_seq} | rotary
            assert case.params == {"count": batch * 2 * rows, "seq": cap, "keySeq": key_seq}
        assert seqlens.dtype == np.int32 and seqlens.shape == (batch,)
        for b, s in enumerate(seqlens):
            kind = (i + b) % 4
            assert seqlens_kind(int(s), key_seq, cap, kind), (i, b, s, key_seq, cap)
            ends.add((kind, "low" if s == [-1, key_seq - 1, cap - 1, cap - 1][kind] else None))
            ends.add(
                (kind, "high" if s == [key_seq - 2, cap - 1, cap - 1, 2 * cap][kind] else None)
            )
    # The random kinds reach both ends of their ranges: the empty sequence, an append that
    # just fits the new tokens or just fills the cache, twice the capacity.
    assert {(0, "low"), (1, "low"), (1, "high"), (3, "low"), (3, "high")} <= ends


def tables(case, half: int) -> tuple[np.ndarray, np.ndarray]:
    """A case's cos and sin tables: the template's two, or the packed ``rotary_table`` taken
    apart (per position ``half`` cos values, then ``half`` sin values)."""
    if "rotary_table" in case.buffers:
        rows = case.buffers["rotary_table"].reshape(-1, 2 * half)
        return rows[:, :half].reshape(-1), rows[:, half:].reshape(-1)
    return case.buffers["cos_cache"], case.buffers["sin_cache"]


def rotary_rows(case, half: int) -> int:
    cos, sin = tables(case, half)
    assert cos.dtype == sin.dtype == np.float32 and cos.size == sin.size
    assert np.allclose(cos**2 + sin**2, 1, atol=1e-6)
    return cos.size // half


def angles_cover_the_circle(cases) -> None:
    cos = np.concatenate([c.buffers["cos_cache"] for c in cases])
    sin = np.concatenate([c.buffers["sin_cache"] for c in cases])
    theta = np.mod(np.arctan2(sin, cos), 2 * np.pi)
    assert theta.min() < 0.05 and theta.max() > 2 * np.pi - 0.05
    assert (cos < 0).any() and (sin < 0).any()


def test_rotary_tables_are_as_long_as_the_positions():
    for name in ("merge_share_append_rotary", "window_shift_append_rotary"):
        cases = cases_for(CONFIGS[name], 6)
        angles_cover_the_circle(cases)
        for case in cases:
            cap, key_seq = case.shape["seq"], case.shape["keySeq"]
            seqlens = case.buffers["seqlens_k"]
            want = cap if name.startswith("merge") else int(seqlens.max()) + key_seq + 1
            assert rotary_rows(case, 4) == want
    cases = cases_for(CONFIGS["build_rotary"], 6)
    angles_cover_the_circle(cases)
    for case in cases:
        assert rotary_rows(case, 4) == case.shape["pastSeq"] + case.shape["seq"]
    for case in cases_for(CONFIGS["append_quant_rotary"], 3):
        assert rotary_rows(case, 4) == case.shape["totalSeq"]
    for name in ("merge_share_append_f16", "window_shift_all", "build", "append_quant"):
        assert "cos_cache" not in cases_for(CONFIGS[name], 1)[0].buffers


def test_partial_rotary_tables_hold_half_entries_per_position():
    """A partial rotary's tables hold ``rotary_half`` entries per position, for the positions
    the mode rotates at (as its whole-head form)."""
    positions = {
        "merge_share_append_rotary_partial": lambda c: c.shape["seq"],
        "window_shift_all_rotary_partial": lambda c: int(c.buffers["seqlens_k"].max())
        + c.shape["keySeq"]
        + 1,
        "build_rotary_partial": lambda c: c.shape["pastSeq"] + c.shape["seq"],
        "append_quant_rotary_partial": lambda c: c.shape["totalSeq"],
    }
    for name, rows in positions.items():
        half = CONFIGS[name].rotary_half
        assert 2 * half < CONFIGS[name].head_dim
        for case in cases_for(CONFIGS[name], 3):
            assert tables(case, half)[0].size == rows(case) * half
            assert rotary_rows(case, half) == rows(case)


def test_build_shapes():
    for i, case in enumerate(cases_for(CONFIGS["build"], 6)):
        batch, seq, past = 1 + i % 2, [1, 13, 70][i % 3], [0, 5, 31][i % 3]
        assert case.shape == {"batch": batch, "seq": seq, "pastSeq": past}
        assert case.params == {"count": batch * 2 * seq, "seq": seq, "pastSeq": past}
        assert case.buffers["src_k"].dtype == np.float32
        assert case.expected["present_key"].dtype == np.float32


def test_k_norm_weights():
    cases = cases_for(CONFIGS["build_knorm_rotary_f16"], 30)
    w = np.stack([c.buffers["k_norm_weight"] for c in cases])
    assert w.dtype == np.float32 and w.shape == (30, 8)
    assert 0.5 <= w.min() < 0.55 and 1.45 < w.max() < 1.5
    assert cases[0].expected["present_key"].dtype == np.float16


def test_build_quant_shapes_and_scales():
    cfg = CONFIGS["build_quant"]
    for i, case in enumerate(cases_for(cfg, 40)):
        batch, seq, past = 1 + i % 2, [1, 13, 40][i % 3], [0, 5, 31][i % 3]
        per_channel = int(i % 2 == 0)
        assert case.shape == {
            "batch": batch,
            "seq": seq,
            "pastSeq": past,
            "perChannel": per_channel,
        }
        assert case.params == {
            "count": batch * 2 * seq,
            "seq": seq,
            "pastSeq": past,
            "perChannel": per_channel,
        }
        n = 16 if per_channel else 1
        for s in ("k_scale", "v_scale"):
            scale = case.buffers[s]
            assert scale.dtype == np.float32 and scale.shape == (n,)
            assert (1.2 <= scale * 127 + 1e-5).all() and (scale * 127 < 2.5 + 1e-5).all()


def test_scales_span_their_range():
    k, v = [], []
    for case in cases_for(CONFIGS["append_quant"], 60):
        k.append(case.buffers["k_scale"] * 127)
        v.append(case.buffers["v_scale"] * 127)
    for s in (np.concatenate(k), np.concatenate(v)):
        assert 1.2 - 1e-5 <= s.min() < 1.3 and 2.4 < s.max() < 2.5 + 1e-5
    int4 = cases_for(CONFIGS["append_quant_int4_knorm"], 2)[1]
    assert int4.buffers["k_scale"].shape == (16,)
    assert (int4.buffers["k_scale"] * 7 >= 1.2 - 1e-5).all()
    assert (int4.buffers["k_scale"] * 7 < 2.5 + 1e-5).all()


def test_quantised_cases_allow_a_step_only_after_approximate_math():
    assert cases_for(CONFIGS["build_quant"], 1)[0].codes == {"present_key": 8, "present_value": 8}
    assert cases_for(CONFIGS["build_quant"], 1)[0].quantized == {}
    rot = cases_for(CONFIGS["build_quant_int4_rotary"], 1)[0]
    assert rot.codes == {"present_key": 4, "present_value": 4}
    assert rot.quantized == {"present_key": 4}
    norm = cases_for(CONFIGS["append_quant_int4_knorm"], 1)[0]
    assert norm.quantized == {"present_key": 4} and norm.tolerance == {}
    assert cases_for(CONFIGS["append_quant"], 1)[0].quantized == {}
    assert cases_for(CONFIGS["build_quant_knorm"], 1)[0].quantized == {"present_key": 8}


def test_float_tolerance_only_where_the_mode_transforms():
    def tol(name):
        return cases_for(CONFIGS[name], 1)[0].tolerance

    assert tol("merge_share_retain") == {"present_key": 0.0}
    assert tol("merge_share_append_f16") == {"present_key": 0.0}
    assert tol("merge_share_append_rotary") == {"present_key": 2e-5}
    assert tol("merge_share_append_rotary_f16") == {"present_key": 2e-3}
    assert tol("window_shift_all") == {"present_key": 0.0}
    assert tol("window_shift_append") == {"present_key": 0.0}
    assert tol("window_shift_append_rotary") == {"present_key": 2e-5}
    assert tol("build") == {"present_key": 0.0}
    assert tol("build_rotary") == {"present_key": 2e-5}
    assert tol("build_knorm_rotary_f16") == {"present_key": 2e-3}
    assert tol("transpose") == tol("merge") == tol("copy") == {}


def test_quantisation_range_is_the_configs():
    """Scales put values past both ends of a narrow range: codes clamp at the config's qmin/qmax."""
    codes = np.concatenate(
        [c.expected["present_key"] for c in cases_for(CONFIGS["build_quant_range"], 3)]
    )
    assert codes.min() == -20 and codes.max() == 30


def test_k_norm_eps_is_the_configs():
    """A large eps (0.25) changes the normed K: the case's expected K uses the config's eps."""
    cfg = CONFIGS["build_quant_knorm"]
    case = cases_for(cfg, 1)[0]
    from kvdsl import reference

    k = case.buffers["src_k"].reshape(1, 1, 16)
    w = case.buffers["k_norm_weight"]
    q = reference.Quant(8, case.buffers["k_scale"], case.buffers["v_scale"], True)
    ours, _ = reference.build_quant(k, k, 2, q, 0, reference.KNorm(w, 0.25))
    other, _ = reference.build_quant(k, k, 2, q, 0, reference.KNorm(w, 1e-6))
    got = case.expected["present_key"].reshape(ours.shape)
    assert np.array_equal(got, ours) and not np.array_equal(got, other)


# ---- values ---------------------------------------------------------------------------------------


def test_float_values_are_non_zero_both_signs():
    x = values(np.random.default_rng(0), (100, 100), np.float32)
    assert x.dtype == np.float32 and x.shape == (100, 100)
    mag = np.abs(x)
    assert 0.25 <= mag.min() < 0.26 and 1.99 < mag.max() < 2.0
    assert 0.45 < (x < 0).mean() < 0.55
    h = values(np.random.default_rng(1), 7, "f2")
    assert h.dtype == np.float16 and h.shape == (7,)


def test_integer_values_span_their_type_and_skip_zero():
    x = values(np.random.default_rng(0), 200_000, np.int8)
    assert x.dtype == np.int8 and x.shape == (200_000,)
    assert x.min() == -128 and x.max() == 127 and (x != 0).all()
    counts = np.bincount(x.astype(np.int64) + 128, minlength=256)
    # Zero became one: one is drawn about twice as often as any other value.
    assert counts[129] > 1.6 * np.median(counts)
    assert counts[130] < 1.3 * np.median(counts)
    u = values(np.random.default_rng(0), 50_000, np.uint8)
    assert u.dtype == np.uint8 and u.max() == 255 and (u != 0).all()
    w = values(np.random.default_rng(0), (3, 4), np.int32)
    assert w.shape == (3, 4) and w.dtype == np.int32 and np.abs(w.astype(np.int64)).max() > 2**20


def test_dtype_names():
    assert dtype("f16") == np.float16 and dtype("f32") == np.float32
    assert dtype("i32") == np.int32 and dtype("u32") == np.uint32
