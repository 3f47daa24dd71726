"""What a kernel that writes exactly the reference gives for a harness case, what the case's
verdict makes of changes to it, and a kernel's run over a config's cases against the
reference."""

from __future__ import annotations

import numpy as np


def reference_outputs(case) -> dict[str, np.ndarray]:
    """Each output as the reference wants it; where the mode writes only part of a buffer (the
    case's ``written`` mask), the rest is the buffer as the case passed it in."""
    got = {}
    for out, want in case.expected.items():
        mask = case.written.get(out)
        got[out] = want.copy() if mask is None else np.where(mask, want, case.buffers[out])
    return got


def assert_changes_are_caught(case, got: dict, out: str, step: float) -> None:
    """``got`` (the case's reference outputs) with the last element of ``out`` the case writes
    changed (a word's bit 15 flipped: a code 8 or 128 steps off; a float's ``step`` added) fails
    as ``out``'s; where the case writes only part of ``out``, an element outside it set to 0
    fails as written where it should not be."""
    mask = case.written.get(out, np.ones(case.expected[out].size, bool))
    bad = {k: v.copy() for k, v in got.items()}
    i = int(np.flatnonzero(mask)[-1])
    kind = bad[out].dtype
    bad[out][i] = bad[out][i] ^ kind.type(0x8000) if kind.kind == "u" else bad[out][i] + step
    assert case.against_reference(bad)[0].startswith(f"{case.label()} {out}:")
    if not mask.all():
        stale = {k: v.copy() for k, v in got.items()}
        stale[out][int(np.flatnonzero(~mask)[0])] = kind.type(0)
        assert "should not be" in case.against_reference(stale)[0]


def assert_cases_pass(kernel, cfg, count: int, seed: int, run=None) -> None:
    """``count`` of ``cfg``'s cases (from ``seed``) run through ``kernel`` by ``run`` (the
    interpreter's where none) leave what the reference says, each case giving a buffer to each
    of the kernel's bindings and to nothing else. A GPU's (``run`` given) quantised outputs may
    move a code a step, as ``kvdsl verify`` allows (its f32 division is accurate to 2.5 ULP)."""
    from kvdsl import interp
    from kvdsl.harness.cases import cases_for

    for case in cases_for(cfg, count, seed=seed):
        assert set(case.buffers) == {b.name for b in kernel.bindings}
        out = (run or interp.run)(kernel, dict(case.buffers), case.params)
        codes = None if run is None else case.codes
        problems = [f"{case.label()} {n}: {p}" for n, _, p in case.judge(out, codes=codes) if p]
        assert problems == [], problems
