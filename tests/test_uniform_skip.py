"""merge_share's cooperative append with the uniform skip (kvdsl.nodes.walks.cooperative_bounded_split).

Each loop of the drop-in cooperative append (and of the hybrid walk's cooperative branch) is
generated twice under the uniform ``keySeq <= seq``: without the ``j >= skip`` test (skip is 0
there) and as before. Both paths run here, on the interpreter and the GPU, against the numpy
reference with poisoned outputs: new tokens that fit the cache (``keySeq <= capacity``) and an
append longer than the cache (``keySeq > capacity``: the first tokens are skipped), with
``seqlens_k`` of every adversarial kind and partial last workgroups. The legacy parity tests
(tests/test_parity.py) check the same kernels against the template.
"""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import catalog
from kvdsl.emit import emit
from kvdsl.interp import run as interp_run
from kvdsl.kernels.merge_share import MergeShareConfig
from kvdsl.runtime import run as gpu_run
from test_fuzz import window_case

CONFIGS = [
    MergeShareConfig(2, 16, "append"),
    MergeShareConfig(3, 8, "append", rotary=True),
    MergeShareConfig(2, 16, "append", "hybrid", rotary=True),
    MergeShareConfig(2, 8, "append", present_type="f16", input_type="f16"),
]
# (capacity, keySeq, seqlens_k): fits (keySeq <= capacity) and longer than the
# cache (keySeq > capacity); seqlens_k mixes a right-padded prompt, a mid-cache append, a full
# cache and one past the capacity.
SHAPES = [
    (9, 3, [0, 4, 8, 30]),
    (10, 8, [2, 5, 9, 11]),
    (5, 7, [-5, 3, 4, 40]),
    (4, 9, [8, 2, 20, 3]),
]
_KERNELS: dict = {}


def kernel(cfg):
    if cfg not in _KERNELS:
        _KERNELS[cfg] = catalog.build_config(cfg)
    return _KERNELS[cfg]


def test_each_loop_is_split_on_the_uniform_condition():
    text = emit(kernel(CONFIGS[0]))
    assert text.count("if (params.keySeq <= params.seq) {") == 2  # the full-tile and last loops
    assert text.count("if (j >= skip) {") == 2  # only in the else copies
    assert text.count("for (") == 4


@pytest.mark.parametrize("backend", ["interp", "gpu"])
@pytest.mark.parametrize("cfg", CONFIGS, ids=[f"{c.walk}-{i}" for i, c in enumerate(CONFIGS)])
def test_both_paths_match_the_reference(cfg, backend, request):
    if backend == "gpu":
        request.getfixturevalue("gpu")
    run = interp_run if backend == "interp" else gpu_run
    k = kernel(cfg)
    skipped = fitted = poisoned = 0
    for n, (cap, key_seq, seqlens) in enumerate(SHAPES):
        # The fuzz's case: tokens that do not fit (keySeq > capacity) are skipped, the last
        # `cap` of them filling the cache from row 0.
        case = window_case(cfg, cap, key_seq, np.array(seqlens, np.int32), n)
        got = run(k, dict(case.buffers), case.params)
        rotated = cfg.rotary and backend == "gpu"
        # Tighter than the case's own tolerance: exact, rotary K on the GPU within 2e-6.
        tol = {"present_key": 2e-6} if rotated else {}
        problems = [(name, p) for name, _, p in case.judge(got, tolerance=tol) if p]
        assert not problems, f"cap={cap} keySeq={key_seq}: {problems}"
        mask = case.written["present_key"]
        assert mask.any()
        poisoned += not mask.all()  # rows the pass does not own must keep the poison
        skipped += key_seq > cap
        fitted += key_seq <= cap
    assert skipped == 2 and fitted == 2 and poisoned >= 2
