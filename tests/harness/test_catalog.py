"""Every catalog variant: compiles under naga and Tint, and verifies on random shapes.

``verify_variant`` runs the interpreter against the reference (no out-of-bounds access, no race)
and the GPU against the interpreter, bit for bit where the mode is a pure data move, on random
non-zero inputs with poisoned outputs.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from kvdsl import catalog
from kvdsl.harness import CASES, cases_for, verify_variant
from kvdsl.emit import emit
from kvdsl.ir import workgroups
from kvdsl.ir.features import limits
from kvdsl.reference.judge import compare
from kvdsl.runtime import FeatureError, compile_wgsl, run, tint_check
from tests.helpers.features import assert_ran_on_gpu, suite_feature

VERIFIED = [n for n, cfg in catalog.VARIANTS.items() if cfg.mode in CASES]


def test_every_mode_has_cases():
    assert VERIFIED == list(catalog.VARIANTS)


def _lacks(gpu: dict, text: str) -> str | None:
    """What ``kvdsl.runtime`` says of a module enabling an extension the adapter lacks (Dawn
    on an H200 has no shader-f16 unless its `vulkan_enable_f16_on_nvidia` toggle is on), or
    None. Only where KVDSL_EXCUSE_FEATURES excuses the feature: elsewhere the test fails."""
    for extension, feature in (("f16", "shader-f16"), ("subgroups", "subgroups")):
        if f"enable {extension};" in text and not suite_feature(gpu, feature):
            return f"the kernel enables {extension} but adapter"
    return None


def test_naga_and_tint_accept_every_variant(gpu):
    # A module enabling a feature the adapter lacks is refused by name, as a host would be.
    # Each on a device with the limits its index.json entry states (most: none past the defaults).
    kernels = catalog.all_kernels()
    sources = {name: emit(k) for name, k in kernels.items()}
    need = {name: limits(k) for name, k in kernels.items()}
    for name, text in sources.items():
        if (feature := _lacks(gpu, text)) is not None:
            with pytest.raises(FeatureError, match=feature):
                compile_wgsl(text, need[name])
        else:
            compile_wgsl(text, need[name])
    problems = {n: e for n, e in tint_check(sources, limits=need).items() if e is not None}
    assert problems == {}


@pytest.mark.parametrize("name", VERIFIED)
def test_variant_verifies(gpu, name):
    result = verify_variant(name, catalog.config(name), catalog.build(name), 3)
    assert_ran_on_gpu(result)  # no variant is left to the interpreter alone


def _nudge(out: dict, name: str, steps: int) -> dict:
    """``out`` with one int8 code of ``name`` moved by ``steps`` (inside the written window)."""
    out = {k: v.copy() for k, v in out.items()}
    a = out[name].reshape(-1)
    i = int(np.flatnonzero(np.abs(a) < 100)[0])
    a[i] += steps
    return out


@pytest.mark.parametrize("steps, ok", [(1, True), (2, False)])
def test_gpu_codes_may_move_one_step(gpu, monkeypatch, steps, ok):
    # WGSL's f32 division is accurate to 2.5 ULP: an H200 rounded round(x / scale) near a .5
    # boundary the other way in 2 of ~8,000 int8 codes of a plain (untransformed) append_quant.
    # Against the GPU one step is allowed; two are a real difference.
    import kvdsl.runtime

    name = "append_quant_int8_phi3_mini"
    real = kvdsl.runtime.run
    monkeypatch.setattr(
        kvdsl.runtime, "run", lambda *a, **k: _nudge(real(*a, **k), "present_value", steps)
    )
    result = verify_variant(name, catalog.config(name), catalog.build(name), 1)
    assert result.ok is ok, result.problems
    assert ok or "gpu vs interp" in result.problems[0]


def test_interpreter_codes_stay_exact(monkeypatch):
    # The interpreter divides exactly, as the reference does: one step off there is a bug.
    import kvdsl.interp

    name = "append_quant_int8_phi3_mini"
    real = kvdsl.interp.run
    monkeypatch.setattr(
        kvdsl.interp, "run", lambda *a, **k: _nudge(real(*a, **k), "present_value", 1)
    )
    result = verify_variant(name, catalog.config(name), catalog.build(name), 1, ("interp",))
    assert not result.ok and "interp vs reference" in result.problems[0]


FOLDED = ["transpose_llama31_8b", "transpose_vec4_f16_llama31_8b", "copy_gemma3_1b"]
FOLDED += ["copy_per_row_llama32_1b", "copy_int4_per_row_llama31_8b"]


@pytest.mark.parametrize("name", FOLDED)
def test_folded_dispatch(gpu, name):
    """A fold width of 3 workgroups forces y > 1 on small shapes; outputs still match exactly."""
    cfg = dataclasses.replace(catalog.config(name), fold=3)
    kernel = catalog.build_config(cfg, name)
    lacks = _lacks(gpu, emit(kernel))
    folded = 0
    for case in cases_for(cfg, 3, seed=7):
        folded += workgroups(kernel, case.params)[1] > 1
        if lacks is not None:  # refused by name (Dawn on an H200 without its f16 toggle)
            with pytest.raises(FeatureError, match=lacks):
                run(kernel, dict(case.buffers), case.params)
            continue
        out = run(kernel, dict(case.buffers), case.params)
        for key, want in case.expected.items():
            assert compare(out[key], want) == (0.0, ""), key
    assert folded >= 1


@pytest.mark.slow
def test_folded_dispatch_at_the_real_fold_width(gpu):
    """Past 65,535 workgroups in x the dispatch folds into y with the catalog's own fold."""
    kernel = catalog.build("transpose_llama31_8b")
    batch, seq, hidden = 1, 4100, 8 * 128  # 4.2M elements = 65,600 workgroups of 64
    params = {"batchSize": batch, "kvSeq": seq}
    assert workgroups(kernel, params) == (65535, 2, 1)
    rng = np.random.default_rng(3)
    key = rng.standard_normal(batch * seq * hidden, dtype=np.float32)
    value = rng.standard_normal(batch * seq * hidden, dtype=np.float32)
    nan = np.full(key.size, np.nan, np.float32)
    out = run(
        kernel, {"key": key, "value": value, "present_key": nan, "present_value": nan}, params
    )
    want = key.reshape(batch, seq, 8, 128).transpose(0, 2, 1, 3).reshape(-1)
    assert np.array_equal(out["present_key"], want)
    assert np.array_equal(
        out["present_value"], value.reshape(1, seq, 8, 128).transpose(0, 2, 1, 3).reshape(-1)
    )
