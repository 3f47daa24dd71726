"""The drop-in kernel of a flat config and the judge of the flat kernel's outputs against it
(``tests/nodes/test_flat.py``; the pair walk and word tests compare the same way), and the run
of two kernels over a config's cases that both compare by it."""

from __future__ import annotations

import dataclasses

import numpy as np

from kvdsl import catalog
from kvdsl.harness.cases import Case
from kvdsl.reference.judge import compare, compare_quantized

DROP_IN_WALK = {"copy": "cooperative", "merge": "cooperative", "merge_share": "cooperative"}


def drop_in(cfg) -> object:
    """The same config with the template's walk and workgroup size."""
    walk = DROP_IN_WALK.get(cfg.mode, "per_row")
    return dataclasses.replace(cfg, walk=walk, workgroup_size=64)


_KERNELS: dict = {}


def kernels(cfg):
    if cfg not in _KERNELS:
        _KERNELS[cfg] = (catalog.build_config(cfg), catalog.build_config(drop_in(cfg)))
    return _KERNELS[cfg]


def judge(case: Case, got: dict, want: dict, kind: str, gpu: bool) -> list[str]:
    """Problems of the flat kernel's outputs ``got`` against ``want`` for a change of ``kind``."""
    problems = []
    for name in case.expected:
        g, w, mask = got[name], want[name], case.written.get(name)
        exact = kind == "exact" or name != "present_key" or (kind == "rotary" and not gpu)
        if exact:
            _, problem = compare(g, w)
        elif g.dtype.kind in "iu":
            _, problem = compare_quantized(g, w, 4 if g.dtype == np.uint32 else 8, mask)
        else:
            # Unwritten elements must keep the poison in both (checked bit for bit by the mask).
            _, problem = compare(g, w, 2e-3 if g.dtype == np.float16 else 4e-6, mask)
        if problem:
            problems.append(f"{name}: {problem}")
    return problems


def assert_same_as(run, kernel, other, cfg, kind: str, seed: int, gpu: bool) -> None:
    """``kernel`` and ``other`` run by ``run`` over three of ``cfg``'s cases leave what
    :func:`judge` takes for a change of ``kind``, and ``kernel``'s outputs are the reference's
    (no element written that the pass does not own)."""
    from kvdsl.harness.cases import cases_for

    for case in cases_for(cfg, 3, seed=seed):
        got = run(kernel, dict(case.buffers), case.params)
        want = run(other, dict(case.buffers), case.params)
        problems = judge(case, got, want, kind, gpu)
        assert not problems, f"{case.label()}: {problems}"
        assert not case.against_reference(got)
