"""The quantising kernels' packed bindings (``rotary_table``, ``kv_scale``) against the
template's, in every walk: the same data laid out either way gives the same codes, the
interpreter equals the reference and the GPU the interpreter, outputs poisoned."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from kvdsl import catalog
from kvdsl.emit import emit
from kvdsl.harness import cases_for
from kvdsl.interp import run as interp_run
from kvdsl.ir.features import limits
from kvdsl.kernels.config import Bindings
from kvdsl.kernels.quant import AppendQuantConfig, BuildQuantConfig, storage_buffers
from kvdsl.runtime import run as gpu_run

# The block walk of the template's dispatch, the flat walk one vector and one pair per
# invocation, a flat walk of scalars (rows of 6 rotary pairs) and the per-row walk (int4 rows of 6
# rotary pairs, which the vector program cannot pack).
WALKS = [
    dict(kv_heads=2, head_dim=16, bits=8, walk="per_row"),
    dict(kv_heads=2, head_dim=16, bits=4, walk="flat", pairs=False),
    dict(kv_heads=3, head_dim=16, bits=8, walk="flat", pairs=True),
    dict(kv_heads=2, head_dim=12, bits=4, walk="per_row"),
    dict(kv_heads=2, head_dim=12, bits=8, walk="flat", workgroup_size=96),
]
CONFIGS = [
    cls(**w, k_norm=k_norm, rotary=True, eps=0.01)
    for cls in (BuildQuantConfig, AppendQuantConfig)
    for w in WALKS
    for k_norm in (False, True)
]


def _id(cfg) -> str:
    return (
        f"{cfg.mode}-h{cfg.kv_heads}-d{cfg.head_dim}-int{cfg.bits}-{cfg.walk}"
        + (f"-pairs{cfg.pairs}" if cfg.pairs is not None else "")
        + ("-knorm" if cfg.k_norm else "")
    )


def test_default_bindings_fit_webgpus_limit():
    """Unset, ``bindings`` is the template's wherever they fit 8 storage buffers, else packed:
    every quantising config builds a kernel that needs no limit past the defaults."""
    for cls in (BuildQuantConfig, AppendQuantConfig):
        for k_norm in (False, True):
            for rotary in (False, True):
                cfg = cls(2, 16, k_norm=k_norm, rotary=rotary)
                template = storage_buffers(cfg, Bindings.TEMPLATE)
                assert cfg.bindings == ("template" if template <= 8 else "packed")
                kernel = catalog.build_config(cfg)
                assert len(kernel.bindings) == storage_buffers(cfg) <= 8
                assert limits(kernel) == {}
                packed = catalog.build_config(dataclasses.replace(cfg, bindings="packed"))
                assert len(packed.bindings) == template - 1 - rotary


@pytest.mark.parametrize("cfg", CONFIGS, ids=_id)
def test_packed_equals_template_and_reference(gpu, cfg):
    packed = dataclasses.replace(cfg, bindings="packed")
    template = dataclasses.replace(cfg, bindings="template")
    kp, kt = catalog.build_config(packed), catalog.build_config(template)
    names = [b.name for b in kp.bindings]
    assert "rotary_table" in names and "kv_scale" in names and len(names) <= 8
    assert not {"cos_cache", "sin_cache", "k_scale", "v_scale"} & set(names)
    assert str(kp.binding("kv_scale").elem) == "vec2<f32>"
    assert limits(kt) == ({"maxStorageBuffersPerShaderStage": len(kt.bindings)}
                          if len(kt.bindings) > 8 else {})  # fmt: skip
    per_row = not packed.plan.program
    assert ("fn kvscale" in emit(kp)) == per_row
    for case_p, case_t in zip(cases_for(packed, 3, seed=2), cases_for(template, 3, seed=2)):
        # The same data, laid out as each kernel binds it.
        bufs_t, bufs_p = case_t.buffers, case_p.buffers
        half = cfg.head_dim // 2
        tables = np.concatenate(
            [bufs_t["cos_cache"].reshape(-1, half), bufs_t["sin_cache"].reshape(-1, half)], axis=1
        )
        assert np.array_equal(bufs_p["rotary_table"], tables.reshape(-1))
        scales = np.stack([bufs_t["k_scale"], bufs_t["v_scale"]], axis=-1).reshape(-1)
        assert np.array_equal(bufs_p["kv_scale"], scales)
        for name in ("present_key", "present_value"):  # poisoned
            assert np.array_equal(bufs_p[name], bufs_t[name]) and bufs_p[name].any()
        got_p = interp_run(kp, dict(bufs_p), case_p.params)
        got_t = interp_run(kt, dict(bufs_t), case_t.params)
        assert case_p.against_reference(got_p) == []
        for name in ("present_key", "present_value"):
            assert np.array_equal(got_p[name], got_t[name]), name
        on_gpu = gpu_run(kp, dict(bufs_p), case_p.params)
        problems = [p for _, _, p in case_p.judge(on_gpu, got_p, case_p.tolerance, case_p.codes)]
        assert not any(problems), problems
