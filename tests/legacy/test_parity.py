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

Each configuration's outcome is pinned (``tests/legacy/parity_expected.json``: every one that
does not match, by test id, with its message; tests/helpers/parity.py reads it), so each case
checks its own; the tally is checked too, and ``docs/legacy.md``'s counts are generated from the
same data. Without the template, only the ``rejected`` cases run (the others are skipped as the
legacy template group).
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
from tests.helpers import parity
from tests.helpers.features import assert_ran_on_gpu
from tests.helpers.legacy import (
    legacy_vars,
    legacy_workgroups,
    render,
    run_legacy,
    template_limits,
)

#: The storage buffers per stage of the host that ran the template: enough for its 10, so the
#: bridge gives the drop-in (the template's bindings) everywhere.
HOST_STORAGE_BUFFERS = 10
COUNTS: Counter = Counter()
#: test id -> outcome, for the configurations run so far.
OUTCOMES: dict[str, str] = {}


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
    # Partial rotary: Phi-2's 32 of 80 dimensions (half 16) and Pythia-2.8B's 20 (half 10, not a
    # multiple of 4: the vector walks take scalars).
    partial = ((2, 80, 16), (1, 80, 10))
    for (heads, dim, half), vendor in itertools.product(partial, ("nvidia", "apple")):
        yield "merge_share", dict(
            kv_heads=heads,
            head_dim=dim,
            vendor=vendor,
            share_region="append",
            rotary=True,
            half=half,
        )
    for (heads, dim, half), region in itertools.product(partial, ("all", "append")):
        yield "window_shift", dict(
            kv_heads=heads, head_dim=dim, shift_region=region, rotary=True, half=half
        )
    for (heads, dim, half), k_norm in itertools.product(partial, (False, True)):
        yield "build", dict(kv_heads=heads, head_dim=dim, k_norm=k_norm, rotary=True, half=half)
    for mode, (heads, dim, half), bits in itertools.product(
        ("build_quant", "append_quant"), partial, (8, 4)
    ):
        yield mode, dict(kv_heads=heads, head_dim=dim, bits=bits, rotary=True, half=half)


MATRIX = [legacy_vars(mode, **opts) for mode, opts in matrix()]


def _id(v: dict) -> str:
    skip = {"tunables", "device", "qkEps", "half", "packed", "headDimV4", "kvHiddenV4", "kvHidden"}
    parts = [f"{k}={v[k]}" for k in sorted(v) if k not in skip and k != "mode"]
    wg = [f"WG={v['tunables']['COPY_WORKGROUP_SIZE']}"] if "tunables" in v else []
    # Partial rotary names its half (rotary over the whole head, half = headDim / 2, does not).
    partial = v.get("hasRotary") and v.get("half", v["headDim"] // 2) != v["headDim"] // 2
    parts += [f"half={v['half']}"] if partial else []
    return "-".join(
        [v["mode"], v.get("device", {}).get("adapterInfo", {}).get("vendor", "")] + wg + parts
    )


def defect_triggered(vars: dict, case) -> str | None:
    """The documented template defects (``docs/legacy.md``) this case's input triggers, comma
    separated, if any."""
    mode, p = vars["mode"], case.params
    found = []
    rotary = vars.get("hasRotary")
    if mode == "window_shift" and rotary and vars["shiftRegion"] == "all":
        found.append("window_shift-all-rotary")  # every case appends new tokens
    partial = rotary and 2 * vars["half"] < vars["headDim"]
    if mode == "merge_share" and partial and vars["shareRegion"] == "append":
        found.append("merge_share-partial-rotary")  # every case appends new tokens
    if mode == "append_quant":
        total = case.buffers["seqlens_k"].astype(np.int64) + 1
        if np.any(total < p["seq"]) or np.any(total > p["totalSeq"]):
            found.append("append_quant-window")
        if vars.get("hasRotary"):
            # kvdsl rotates token t at its row, appendStart + t - skip; the template at
            # pastSeq + t.
            end = np.minimum(p["totalSeq"], np.maximum(p["seq"], total))
            fresh = np.minimum(p["seq"], end)
            row0 = (end - fresh) - (p["seq"] - fresh)
            if np.any((fresh > 0) & (row0 != p["pastSeq"])):
                found.append("append_quant-rotary-position")
    return ", ".join(found) or None


def outcome_of(vars: dict) -> str:
    """Run one configuration; its outcome (``match``, ``defect``, ``invalid``, ``rejected``).

    Every message and every difference is checked against the configuration's pinned
    expectation: a template difference is excused only where parity_expected.json expects the
    configuration to show that defect, and only on the cases whose input triggers it.
    """
    want = parity.expected(_id(vars))
    try:
        cfg = config_from_vars(vars, max_storage_buffers=HOST_STORAGE_BUFFERS)
    except ConfigError as err:
        assert (
            want.outcome == "rejected"
        ), f"the bridge refuses what should be {want.outcome}: {err}"
        assert str(err) == want.message
        return "rejected"
    assert want.outcome != "rejected", f"the bridge accepts what should be refused: {want.message}"
    kernel = catalog.build_config(cfg)
    try:
        compile_wgsl(render(vars, kernel.bindings, kernel.params), template_limits(kernel.bindings))
    except CompileError as err:
        assert want.outcome == "invalid", f"the render does not compile: {err}"
        assert want.message in str(err)
        assert_ran_on_gpu(verify_variant(_id(vars), cfg, kernel, 2))
        return "invalid"
    assert want.outcome != "invalid", f"the render compiles; expected: {want.message}"
    return _compare(vars, cfg, kernel, want)


def _compare(vars: dict, cfg, kernel, want: parity.Expected) -> str:
    """``match`` or ``defect``: the template's outputs beside kvdsl's, case by case."""
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
            # Excused only where this configuration is expected to show this case's defect.
            defect = defect_triggered(vars, case)
            shown = set(want.message.split(", "))
            assert want.outcome == "defect" and defect and set(defect.split(", ")) <= shown, (
                f"{name} differs from the template on {case.label()} (defect triggered: "
                f"{defect}; expected for this configuration: {want.outcome} {want.message})"
            )
            outcome = "defect"
        assert_ran_on_gpu(verify_variant(_id(vars), cfg, kernel, 1, ("gpu",), seed=11))
    assert outcome == want.outcome, f"expected the template to show {want.message}: it matched"
    return outcome


@pytest.mark.parametrize("vars", MATRIX, ids=_id)
def test_template_and_kvdsl_agree(gpu, vars):
    outcome = outcome_of(vars)
    OUTCOMES[_id(vars)] = outcome
    COUNTS[outcome] += 1


def test_parity_is_pinned():
    """Runs last in this module: the matrix, the expectations and the tally agree.

    Alone it checks the matrix against parity_expected.json (every configuration has a unique
    id, the expectations name only configurations of the matrix, and their counts are the
    pinned tally); after the cases, that each ended as expected and, when all ran, the tally.
    """
    ids = [_id(v) for v in MATRIX]
    assert len(set(ids)) == len(ids), "two configurations share a test id"
    pinned = parity.data()
    assert len(ids) == pinned["tried"], "the matrix grew or shrank: update parity_expected.json"
    assert set(parity.listed()) <= set(ids), "expectations for configurations not in the matrix"
    assert len(set(parity.listed())) == len(parity.listed())
    assert Counter(parity.expected(i).outcome for i in ids) == pinned["tally"]
    assert OUTCOMES == {i: parity.expected(i).outcome for i in OUTCOMES}
    if len(OUTCOMES) == len(ids):
        assert COUNTS == pinned["tally"]
    print(
        f"\nparity: {sum(COUNTS.values())} template configurations tried: "
        + ", ".join(f"{k} {v}" for k, v in sorted(COUNTS.items()))
    )


def test_docs_parity_counts_are_generated():
    """docs/legacy.md's parity counts are the block generated from parity_expected.json
    (``python -m tests.helpers.parity`` rewrites it)."""
    text = parity.DOC.read_text()
    assert parity.doc_with_block(text) == text, "run: python -m tests.helpers.parity"
