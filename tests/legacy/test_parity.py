"""Drop-in parity with the legacy template over its whole option matrix.

For every combination of template variables: the template is rendered with jinja2 (with the
resource declarations of kvdsl's kernel, as a host would declare them) and run on the GPU beside
kvdsl's kernel for the same variables, on the same random inputs (adversarial ``seqlens_k``:
right-padded prompts, eviction and no eviction, a full cache), with the same workgroups. Each
configuration ends in one of:

- ``match``: identical outputs on every case (and kvdsl equals the reference);
- ``defect``: the template's output differs only on inputs that trigger one of its documented
  defects (``docs/legacy.md``), and kvdsl's output equals the reference there;
- ``invalid``: the template does not compile for these variables (a documented defect); kvdsl's
  kernel does and verifies;
- ``rejected``: the bridge refuses the variables with a ConfigError naming the reason.

The counts are printed at the end of the run and recorded in ``docs/legacy.md``.
"""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest

from kvdsl import catalog
from kvdsl.harness import cases_for, verify_variant
from kvdsl.ir import workgroups
from kvdsl.kernels.config import ConfigError
from kvdsl.legacy import config_from_vars
from kvdsl.runtime import CompileError, compile_wgsl, run
from tests.helpers.legacy import legacy_vars, legacy_workgroups, render, run_legacy

COUNTS: Counter = Counter()


def matrix():
    """Every mode and sub-option, apple and non-apple walks, several head dims and KV heads."""
    for heads, dim, vec4, pt in itertools.product(
        (1, 8), (64, 96, 128), (False, True), ("f32", "f16")
    ):
        yield "transpose", dict(kv_heads=heads, head_dim=dim, vec4=vec4, present_type=pt)
    yield "transpose", dict(kv_heads=2, head_dim=64, fold=3)
    for dim, vendor, pt, wg in itertools.product(
        (64, 256), ("nvidia", "apple"), ("f32", "f16", "i32", "u32"), (64, 128)
    ):
        yield "copy", dict(head_dim=dim, vendor=vendor, present_type=pt, workgroup_size=wg)
    yield "copy", dict(head_dim=64, vendor="apple", fold=2)
    for (heads, dim), vendor, pt in itertools.product(
        ((2, 64), (8, 128)), ("nvidia", "apple"), ("f32", "f16")
    ):
        yield "merge", dict(kv_heads=heads, head_dim=dim, vendor=vendor, present_type=pt)
    for (heads, dim), vendor, region, rotary, pt in itertools.product(
        ((2, 64), (8, 128)),
        ("nvidia", "apple"),
        ("retain", "append"),
        (False, True),
        ("f32", "f16"),
    ):
        yield "merge_share", dict(
            kv_heads=heads,
            head_dim=dim,
            vendor=vendor,
            share_region=region,
            rotary=rotary,
            present_type=pt,
        )
    for (heads, dim), region, rotary, pt in itertools.product(
        ((2, 64), (8, 128)), ("all", "shift", "append"), (False, True), ("f32", "f16")
    ):
        yield "window_shift", dict(
            kv_heads=heads, head_dim=dim, shift_region=region, rotary=rotary, present_type=pt
        )
    for (heads, dim), k_norm, rotary, pt in itertools.product(
        ((2, 64), (8, 128)), (False, True), (False, True), ("f32", "f16")
    ):
        yield "build", dict(
            kv_heads=heads, head_dim=dim, k_norm=k_norm, rotary=rotary, present_type=pt
        )
    for mode, (heads, dim), bits, k_norm, rotary in itertools.product(
        ("build_quant", "append_quant"), ((2, 64), (8, 128)), (8, 4), (False, True), (False, True)
    ):
        yield mode, dict(kv_heads=heads, head_dim=dim, bits=bits, k_norm=k_norm, rotary=rotary)
    yield "build", dict(kv_heads=2, head_dim=64, rotary=True, vendor="apple")


MATRIX = [legacy_vars(mode, **opts) for mode, opts in matrix()]


def _id(v: dict) -> str:
    skip = {"tunables", "device", "qkEps", "half", "packed", "headDimV4", "kvHiddenV4", "kvHidden"}
    parts = [f"{k}={v[k]}" for k in sorted(v) if k not in skip and k != "mode"]
    return "-".join(
        [v["mode"], v.get("device", {}).get("adapterInfo", {}).get("vendor", "")] + parts
    )


def defect_triggered(vars: dict, case) -> str | None:
    """The documented template defect (``docs/legacy.md``) this case's input triggers, if any."""
    mode, p = vars["mode"], case.params
    if mode == "append_quant":
        total = case.buffers["seqlens_k"].astype(np.int64) + 1
        if np.any(total < p["seq"]) or np.any(total > p["totalSeq"]):
            return "append_quant-window"
    return None


@pytest.mark.parametrize("vars", MATRIX, ids=_id)
def test_template_and_kvdsl_agree(gpu, vars):
    try:
        cfg = config_from_vars(vars)
    except ConfigError as err:
        COUNTS["rejected"] += 1
        assert str(err)  # the reason is named; docs/legacy.md lists each rejection
        return
    kernel = catalog.build_config(cfg)
    try:
        compile_wgsl(render(vars, kernel.bindings, kernel.params))
    except CompileError:
        COUNTS["invalid"] += 1
        result = verify_variant(_id(vars), cfg, kernel, 2)
        assert result.ok, "\n".join(result.problems)
        return
    outcome = "match"
    for case in cases_for(cfg, 3, seed=11):
        assert workgroups(kernel, case.params) == legacy_workgroups(vars, case.params)
        ours = run(kernel, dict(case.buffers), case.params)
        theirs = run_legacy(vars, kernel.bindings, kernel.params, dict(case.buffers), case.params)
        # K RMSNorm sums a row in another order than the template's loop (the block walk's
        # reduction): within the reference's tolerance, quantised codes within one step.
        exact = not getattr(cfg, "k_norm", False)
        tol, codes = ({}, {}) if exact else (case.tolerance, case.codes)
        for name, _, problem in case.judge(ours, theirs, tol, codes):
            if not problem:
                continue
            defect = defect_triggered(vars, case)
            assert defect, f"{name} differs from the template on {case.label()}"
            outcome = "defect"
        result = verify_variant(_id(vars), cfg, kernel, 1, ("gpu",), seed=11)
        assert result.ok, "\n".join(result.problems)
    COUNTS[outcome] += 1


def test_parity_counts_are_collected():
    """Runs last in this module: print the tally (pytest -s shows it; CI logs keep it)."""
    total = sum(COUNTS.values())
    print(
        f"\nparity: {total} template configurations tried: "
        + ", ".join(f"{k} {v}" for k, v in sorted(COUNTS.items()))
    )
    if total:
        assert COUNTS["match"] > 0
