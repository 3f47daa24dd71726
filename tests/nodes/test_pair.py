"""The pair walk of the flat f16 rotary kernels (kvdsl.nodes.walks.pairs / WalkPlan.uses_pairs).

A flat rotary kernel without K RMSNorm that loads f16 data walks one invocation per rotary pair
of vectors ``(dr, dr + HALF_V4)`` unless its config asks otherwise (``pairs=False``): build,
merge_share append and window_shift append. Each pair
kernel runs on the interpreter and the GPU on random never-zero inputs with NaN-poisoned
outputs, bit for bit against the per-vector form of the same config (``pairs=False``) and the
drop-in per-row kernel, and within tolerance of the numpy reference; the cases cover decode (one
new token), partial last workgroups and folded (2D) dispatches. The emitted text has no
``select`` and two stores per present binding; f32, K RMSNorm and rows not of eight keep the
per-vector walk.

The flat K RMSNorm kernels that reduce in workgroup memory walk pairs by default too (the pair
is rotary's, or the row's two halves): they are checked against their per-vector form (K within
a few ulps, V bit for bit) and the reference, on the interpreter and, within WebGPU's default 8
storage buffers, the GPU.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from kvdsl import catalog
from kvdsl.harness import modes  # noqa: F401  (registers the mode case generators)
from kvdsl.harness.cases import cases_for
from kvdsl.emit import emit
from kvdsl.interp import run as interp_run
from kvdsl.ir import workgroups
from kvdsl.kernels.build import BuildConfig, build
from kvdsl.kernels.config import ConfigError
from kvdsl.kernels.merge_share import MergeShareConfig
from kvdsl.kernels.quant import AppendQuantConfig, BuildQuantConfig
from kvdsl.kernels.window_shift import WindowShiftConfig
from tests.helpers.flat import assert_same_as, drop_in
from tests.helpers.backends import backend_run

pytestmark = pytest.mark.filterwarnings("ignore:All-NaN slice")
F16 = dict(present_type="f16", input_type="f16")
SMALL = dict(fold=2, workgroup_size=32)
PAIR_CONFIGS = [
    BuildConfig(2, 16, rotary=True, walk="flat", **F16),
    BuildConfig(3, 8, rotary=True, walk="flat", **SMALL, **F16),
    MergeShareConfig(2, 16, "append", "flat", rotary=True, pairs=True, **F16),
    MergeShareConfig(3, 8, "append", "flat", rotary=True, pairs=True, **SMALL, **F16),
    MergeShareConfig(2, 16, "append", "flat", rotary=True, pairs=True, input_type="f16"),
    WindowShiftConfig(2, 16, "append", True, walk="flat", pairs=True, **F16),
    WindowShiftConfig(3, 8, "append", True, walk="flat", pairs=True, **SMALL, **F16),
]
# Flat rotary kernels that keep one invocation per vector: f32 loads (f16 present too), K
# RMSNorm reduced across subgroups, rows not of 8, and f16 appends that ask (pairs=False).
VECTOR_CONFIGS = [
    BuildConfig(2, 16, rotary=True, walk="flat"),
    BuildConfig(3, 8, rotary=True, walk="flat", present_type="f16", **SMALL),
    BuildConfig(2, 16, k_norm=True, rotary=True, walk="flat", reduction="subgroup", **F16),
    BuildConfig(2, 12, rotary=True, walk="flat", **F16),
    MergeShareConfig(2, 16, "append", "flat", rotary=True),
    MergeShareConfig(2, 16, "append", "flat", rotary=True, pairs=False, **F16),
    MergeShareConfig(2, 12, "append", "flat", rotary=True, **F16),
    WindowShiftConfig(2, 16, "append", True, walk="flat"),
    WindowShiftConfig(2, 16, "append", True, walk="flat", pairs=False, **F16),
]
PAIR_VARIANTS = [
    "build_rotary_flat_f16_in_llama31_8b",
    "merge_share_append_rotary_flat_f16_llama31_8b",
    "window_shift_append_rotary_flat_f16_gemma2_2b",
]
_FORMS: dict = {}
_DROP_INS: dict = {}


def forms(cfg):
    """``cfg``'s pair kernel and its per-vector form (``pairs=False``)."""
    if cfg not in _FORMS:
        vector = dataclasses.replace(cfg, pairs=False)
        _FORMS[cfg] = (catalog.build_config(cfg), catalog.build_config(vector))
    return _FORMS[cfg]


def kernels(cfg):
    """``cfg``'s pair kernel, its per-vector form and the drop-in kernel (template walk)."""
    if cfg not in _DROP_INS:
        _DROP_INS[cfg] = catalog.build_config(drop_in(dataclasses.replace(cfg, pairs=None)))
    return (*forms(cfg), _DROP_INS[cfg])


def _ids(cfgs) -> list[str]:
    return [f"{c.mode}-{i}" for i, c in enumerate(cfgs)]


def _stores(text: str, binding: str) -> int:
    return sum(line.lstrip().startswith(f"{binding}[") for line in text.splitlines())


@pytest.mark.parametrize("cfg", PAIR_CONFIGS, ids=_ids(PAIR_CONFIGS))
def test_pair_text_shape(cfg):
    pair, vector, _ = kernels(cfg)
    assert cfg.plan.uses_pairs
    text = emit(pair)
    assert "select(" not in text
    assert "if (e >= params.count * HALF_V4) {" in text
    assert "let dr = e % HALF_V4;" in text and "let row = e / HALF_V4;" in text
    for binding in ("present_key", "present_value"):
        assert _stores(text, binding) == 2, binding
        assert f"{binding}[dst + HALF_V4] = " in text, binding
    assert "x0 * cs - x1 * sn" in text and "x1 * cs + x0 * sn" in text
    # The per-vector form: one select, one store per binding, count * HEAD_DIM_V4 items.
    old = emit(vector)
    assert old.count("select(") == 1 and "params.count * HEAD_DIM_V4" in old
    assert all(_stores(old, b) == 1 for b in ("present_key", "present_value"))


def test_dispatch_counts_pairs():
    pair, vector, _ = kernels(PAIR_CONFIGS[0])  # 16 halves per row: 2 pairs of vec4
    params = {"count": 300, "seq": 1, "pastSeq": 0}
    assert workgroups(pair, params) == (3, 1, 1)  # 600 items, WG 256
    assert workgroups(vector, params) == (5, 1, 1)  # 1,200 items
    folded, _, _ = kernels(PAIR_CONFIGS[1])  # 8 halves: 1 pair, fold 2, WG 32
    assert workgroups(folded, {"count": 70, "seq": 70, "pastSeq": 0}) == (2, 2, 1)


@pytest.mark.parametrize("name", PAIR_VARIANTS)
def test_catalog_f16_rotary_flat_variants_walk_pairs(name):
    assert catalog.config(name).plan.uses_pairs
    text = emit(catalog.build(name))
    assert "select(" not in text and "params.count * HALF_V4" in text


@pytest.mark.parametrize("cfg", VECTOR_CONFIGS, ids=_ids(VECTOR_CONFIGS))
def test_f32_knorm_and_rows_not_of_eight_keep_the_vector_walk(cfg):
    assert not cfg.plan.uses_pairs
    text = emit(catalog.build_config(cfg))
    assert "let row = e / HALF_V4;" not in text and "let row = e / HALF;" not in text
    assert "select(" in text  # each invocation keeps one rotated half


DROP_IN_F16 = [
    MergeShareConfig(2, 16, "append", "cooperative", rotary=True, **F16),
    MergeShareConfig(2, 16, "append", "per_row", rotary=True, input_type="f16"),
    WindowShiftConfig(2, 16, "append", True, **F16),
]


@pytest.mark.parametrize("cfg", DROP_IN_F16, ids=_ids(DROP_IN_F16))
def test_drop_in_f16_rotary_appends_walk_pairs_and_f32_ones_vectors(cfg):
    """In the block walk pairs halve a lane's steps: the f16 rotary drop-ins take
    them; the same configs loading f32 keep one invocation per vector."""
    assert cfg.plan.uses_pairs
    text = emit(catalog.build_config(cfg))
    assert "let itemEnd = params.count * HALF_V4;" in text and "select(" not in text
    f32 = dataclasses.replace(cfg, present_type="f32", input_type="f32")
    assert not f32.plan.uses_pairs
    text = emit(catalog.build_config(f32))
    assert "let itemEnd = params.count * HEAD_DIM_V4;" in text and "select(" in text


def test_pairs_true_is_checked():
    want = "pairs=True: expected None or False unless walk='flat', rotary=True or k_norm=True"
    with pytest.raises(ConfigError, match=re.escape(want)):
        BuildConfig(2, 12, k_norm=True, walk="flat", workgroup_size=48, pairs=True)
    with pytest.raises(ConfigError, match=re.escape(want)):
        BuildQuantConfig(2, 16, 8, walk="flat", pairs=True)
    with pytest.raises(ConfigError, match=re.escape(want)):
        AppendQuantConfig(2, 16, 8, k_norm=True, pairs=True)  # the per-row walk
    with pytest.raises(ConfigError, match=re.escape(want)):
        MergeShareConfig(2, 12, "append", "flat", rotary=True, pairs=True, **F16)
    with pytest.raises(ConfigError, match=re.escape(want)):
        WindowShiftConfig(2, 16, "append", False, walk="flat", pairs=True, **F16)
    with pytest.raises(
        ConfigError, match="pairs=1: expected true, false or unset .None: the mode's default."
    ):
        BuildConfig(2, 16, rotary=True, walk="flat", pairs=1)


@pytest.mark.parametrize("backend", ["interp", "gpu"])
@pytest.mark.parametrize("cfg", PAIR_CONFIGS, ids=_ids(PAIR_CONFIGS))
def test_pairs_match_vector_form_drop_in_and_reference(cfg, backend, request):
    run = backend_run(backend, request)
    pair, vector, drop = kernels(cfg)
    for case in cases_for(cfg, 3, seed=17):
        got = run(pair, dict(case.buffers), case.params)
        want = run(vector, dict(case.buffers), case.params)
        template_walk = run(drop, dict(case.buffers), case.params)
        for name in case.expected:
            bits = got[name].view(np.uint16 if got[name].dtype == np.float16 else np.uint32)
            # Bit for bit: every element the other forms wrote, and the poison they left.
            for other in (want, template_walk):
                assert np.array_equal(bits, other[name].view(bits.dtype)), (case.label(), name)
        assert not case.against_reference(got)


def test_pair_forced_on_f32_matches_the_vector_walk():
    """The pair walk is an f16 choice, not an f16 requirement: forced on f32 data it writes
    the per-vector walk's bits too."""
    cfg = BuildConfig(2, 16, rotary=True, walk="flat")
    pair, vector = build(dataclasses.replace(cfg, pairs=True)), build(cfg)
    assert "select(" not in emit(pair) and "select(" in emit(vector)
    for case in cases_for(cfg, 3, seed=5):
        got = interp_run(pair, dict(case.buffers), case.params)
        want = interp_run(vector, dict(case.buffers), case.params)
        for name in case.expected:
            assert np.array_equal(got[name].view(np.uint32), want[name].view(np.uint32)), name


def test_cases_cover_decode_partial_and_folded_dispatches():
    decode = partial = folded = 0
    for cfg in PAIR_CONFIGS:
        pair, _, _ = kernels(cfg)
        for case in cases_for(cfg, 3, seed=17):
            items = case.params["count"] * (cfg.head_dim // 8)
            decode += case.params.get("keySeq", case.params.get("seq")) == 1
            partial += items % cfg.workgroup_size != 0
            folded += workgroups(pair, case.params)[1] > 1
    assert decode >= 7 and partial >= 14 and folded >= 3


# ---- K RMSNorm on the pair walk ---------------------------------------------------------------

# The flat K RMSNorm kernels that reduce in workgroup memory walk pairs by default (the pair is
# the row's vectors d and d + HALF_V4: rotary's pair with rotary, the row's halves without);
# asked, the subgroup reduction and a rotary quantising kernel without K RMSNorm do too.
KNORM_PAIR_CONFIGS = [
    BuildConfig(2, 16, k_norm=True, walk="flat"),
    BuildConfig(2, 16, k_norm=True, rotary=True, walk="flat", **F16),
    BuildConfig(3, 8, k_norm=True, walk="flat", **SMALL),  # one pair per row: scalar partials
    BuildConfig(2, 64, k_norm=True, rotary=True, walk="flat", reduction="subgroup", pairs=True),
    BuildQuantConfig(2, 32, 4, k_norm=True, walk="flat"),
    BuildQuantConfig(2, 32, 8, k_norm=True, rotary=True, walk="flat", bindings="template", **SMALL),
    BuildQuantConfig(2, 16, 8, rotary=True, walk="flat", pairs=True),
    AppendQuantConfig(2, 32, 4, k_norm=True, walk="flat"),
    AppendQuantConfig(
        3, 16, 8, k_norm=True, rotary=True, walk="flat", bindings="template", **SMALL
    ),
]


@pytest.mark.parametrize("cfg", KNORM_PAIR_CONFIGS, ids=_ids(KNORM_PAIR_CONFIGS))
def test_knorm_pair_text_shape(cfg):
    pair, vector = forms(cfg)
    assert cfg.plan.uses_pairs
    text = emit(pair)
    assert "let dr = e % HALF_V4;" in text
    for binding in ("present_key", "present_value"):
        assert _stores(text, binding) == 2, binding
        assert f"{binding}[dst + HALF_V4] = " in text, binding
    if cfg.rotary:
        assert "x0 * cs - x1 * sn" in text and "x1 * cs + x0 * sn" in text
        assert "select(x1" not in text  # no rotated half thrown away
    if cfg.k_norm:
        # No return before the barrier: invocations past the end clamp their row.
        assert "let row = min(e / HALF_V4, params.count - 1u);" in text
        assert "let items = params.count * HALF_V4;" in text
        if cfg.reduction == "workgroup":
            assert "dot(x0Raw, x0Raw) + dot(x1Raw, x1Raw);" in text
        assert "params.count * HEAD_DIM_V4" in emit(vector)
    else:
        assert "if (e >= params.count * HALF_V4) {" in text


def test_knorm_pair_dispatch_is_half_the_vectors():
    pair, vector = forms(KNORM_PAIR_CONFIGS[4])  # 32 dims: 8 vec4, 4 pairs per row
    params = {"count": 100, "seq": 1, "pastSeq": 0, "perChannel": 1}
    assert pair.workgroup_size == vector.workgroup_size == (128, 1, 1)  # config.KNORM_WORKGROUP
    assert workgroups(pair, params) == (4, 1, 1)  # 400 items
    assert workgroups(vector, params) == (7, 1, 1)  # 800 items


# The template's bindings of a quantising kernel with K RMSNorm and rotary (9-10 storage buffers)
# run on a device requested with that limit.
KNORM_PAIR_RUNS = [
    pytest.param(cfg, backend, id=f"{cfg.mode}-{i}-{backend}")
    for i, cfg in enumerate(KNORM_PAIR_CONFIGS)
    for backend in ("interp", "gpu")
]


@pytest.mark.parametrize("cfg,backend", KNORM_PAIR_RUNS)
def test_knorm_pairs_match_vector_form_and_reference(cfg, backend, request):
    """The pair's sum of squares adds its two dots first, so K may differ from the per-vector
    form's in the last ulps (quantised: one step in a few codes); V is bit for bit, and so is
    rotary K without the norm on the interpreter. Unwritten elements keep the poison."""
    run = backend_run(backend, request)
    pair, vector = forms(cfg)
    kind = "norm" if cfg.k_norm else "rotary"
    assert_same_as(run, pair, vector, cfg, kind, 23, backend == "gpu")
