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

from kvdsl import catalog, reference
from kvdsl.check.compare import compare, poison
from kvdsl.emit import emit
from kvdsl.interp import run as interp_run
from kvdsl.kernels.merge_share import MergeShareConfig
from kvdsl.runtime import run as gpu_run

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


def _case(cfg, cap: int, key_seq: int, seqlens: list[int], seed: int):
    rng = np.random.default_rng(seed)
    batch, h, d = len(seqlens), cfg.kv_heads, cfg.head_dim
    it, ct = np.dtype(cfg.input_type.replace("f", "float")), cfg.present_type
    ct = np.float16 if ct == "f16" else np.float32
    new = [
        (rng.uniform(0.25, 2.0, (batch, key_seq, h * d)) * rng.choice([-1, 1], (1, 1, h * d)))
        for _ in range(2)
    ]
    new_k, new_v = (x.astype(it) for x in new)
    sl = np.array(seqlens, np.int32)
    rot = None
    bufs = {"new_k": new_k.reshape(-1), "new_v": new_v.reshape(-1), "seqlens_k": sl}
    if cfg.rotary:
        theta = rng.uniform(0, 2 * np.pi, (cap, d // 2))
        rot = reference.Rotary(np.cos(theta).astype(np.float32), np.sin(theta).astype(np.float32))
        bufs |= {"cos_cache": rot.cos.reshape(-1), "sin_cache": rot.sin.reshape(-1)}
    # Tokens that do not fit (keySeq > capacity) are skipped: the last `cap` of them fill the
    # cache from row 0, which the reference states as an append of those alone.
    fit = slice(max(key_seq - cap, 0), None)
    w = reference.merge_share_append(
        new_k[:, fit].astype(np.float32), new_v[:, fit].astype(np.float32), sl, cap, h, rot, ct
    )
    size = batch * h * cap * d
    bufs |= {"present_key": poison(size, ct), "present_value": poison(size, ct)}
    params = {"count": batch * h * key_seq, "seq": cap, "keySeq": key_seq}
    return bufs, params, w


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
        bufs, params, w = _case(cfg, cap, key_seq, seqlens, seed=n)
        got = run(k, dict(bufs), params)
        rotated = cfg.rotary and backend == "gpu"
        for name, want in (("present_key", w.key), ("present_value", w.value)):
            tol = 2e-6 if rotated and name == "present_key" else 0.0
            _, problem = compare(got[name], want.reshape(-1), tol, w.mask.reshape(-1))
            assert not problem, f"cap={cap} keySeq={key_seq} {name}: {problem}"
        assert w.mask.any()
        poisoned += not w.mask.all()  # rows the pass does not own must keep the poison
        skipped += key_seq > cap
        fitted += key_seq <= cap
    assert skipped == 2 and fitted == 2 and poisoned >= 2
