"""Drop-in parity: for the same template variables, the legacy template (rendered with jinja2)
and kvdsl's kernel produce identical outputs on the GPU, with the same interface and dispatch.

The template is rendered with the resource declarations of kvdsl's kernel (the host's job), so a
difference in binding names, element types or params fields shows up as a compile error here.
"""

from __future__ import annotations

import itertools

import pytest

from kvdsl import catalog
from kvdsl.check import cases_for, compare
from kvdsl.ir import workgroups
from kvdsl.legacy import config_from_vars
from legacy import legacy_vars, legacy_workgroups, run_legacy

MATRIX: list[dict] = []
for heads, dim, vec4, present in itertools.product(
    (1, 8), (64, 96, 128), (False, True), ("f32", "f16")
):
    MATRIX.append(
        legacy_vars("transpose", kv_heads=heads, head_dim=dim, vec4=vec4, present_type=present)
    )
for dim, vendor, elem, wg in itertools.product(
    (64, 128, 256), ("nvidia", "apple"), ("f32", "i32"), (64, 128)
):
    MATRIX.append(
        legacy_vars("copy", head_dim=dim, vendor=vendor, present_type=elem, workgroup_size=wg)
    )
MATRIX.append(legacy_vars("transpose", kv_heads=2, head_dim=64, fold=3))
MATRIX.append(legacy_vars("copy", head_dim=64, fold=2, vendor="apple"))


def _id(v: dict) -> str:
    keys = (
        "mode",
        "kvNumHeads",
        "kvHeads",
        "headDim",
        "presentVec4",
        "presentScalar",
        "DISPATCH_FOLD_WIDTH",
    )
    parts = [f"{k}={v[k]}" for k in keys if k in v]
    if "device" in v:
        parts.append(v["device"]["adapterInfo"]["vendor"])
    return ",".join(parts)


@pytest.mark.parametrize("vars", MATRIX, ids=_id)
def test_template_and_kvdsl_agree(gpu, vars):
    cfg = config_from_vars(vars)
    kernel = catalog.build_config(cfg)
    for case in cases_for(cfg, 3, seed=11):
        assert workgroups(kernel, case.params) == legacy_workgroups(vars, case.params)
        ours = catalog_run(kernel, case)
        theirs = run_legacy(vars, kernel.bindings, kernel.params, dict(case.buffers), case.params)
        for name in case.expected:
            assert compare(ours[name], theirs[name], mask=case.written.get(name)) == (0.0, ""), name
            assert compare(ours[name], case.expected[name]) == (0.0, ""), name


def catalog_run(kernel, case):
    from kvdsl.runtime import run

    return run(kernel, dict(case.buffers), case.params)
