"""kvdsl.nodes.window: the append window and the sliding-window eviction, alone, against numpy.

A tiny kernel evaluates the node for one batch per invocation and stores every value it names;
the expected values come from :mod:`kvdsl.reference` (int64 arithmetic, nothing wraps) and, for
the cases the reference rejects (more new tokens than the capacity), from the meaning.
"""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import reference as ref
from kvdsl.ir import Dispatch, KernelBuilder, i32, u32
from kvdsl.nodes import window

I32_MIN, I32_MAX = -(2**31), 2**31 - 1
SEQLENS = np.array([-1, 0, 1, 2, 3, 4, 5, 6, 7, 9, 12, 40, -2, -7, I32_MIN, I32_MAX], np.int32)
# (capacity, keySeq): decode, prefill, a full-size prefill, huge capacities that would wrap.
SHAPES = [(8, 1), (8, 3), (8, 8), (5, 4), (1, 1), (2**32 - 1, 1), (2**32 - 1, 2**31 + 5)]
SHAPES_OVER = [(4, 6), (1, 3), (3, 2**31)]  # more new tokens than the cache holds


def _backends() -> list:
    """The GPU and the interpreter: both always run (an interpreter that fails to import is an
    error, not a reason to drop its cases)."""
    from kvdsl.interp import run as interp_run
    from kvdsl.runtime import run as gpu_run

    return [pytest.param(gpu_run, id="gpu"), pytest.param(interp_run, id="interp")]


BACKENDS = _backends()


def _probe(kind: str):
    """A kernel storing the node's values for batch ``i`` at ``out[i * n + k]``."""
    kb = KernelBuilder(f"probe_{kind}", 8)
    seqlens_k = kb.binding("seqlens_k", i32, "read")
    out = kb.binding("out", u32, "read_write")
    count, seq, key_seq = kb.param("count"), kb.param("seq"), kb.param("keySeq")
    i = kb.let("i", kb.gid.x)
    with kb.if_(i >= count):
        kb.ret()
    if kind == "append":
        w = window.append_window(kb, seqlens_k, i, seq, key_seq)
        values = (w.append_start, w.active_end, w.skip)
    else:
        w = window.sliding_window(kb, seqlens_k, i, seq, key_seq)
        values = (w.past, w.evicted, w.append_start, w.resident, w.skip)
    for k, v in enumerate(values):
        out[i * len(values) + k] = v
    return kb.build(Dispatch(count.node, 8, 65535)), len(values)


def _run(run, kind: str, seq: int, key_seq: int) -> np.ndarray:
    kernel, n = _probe(kind)
    buffers = {"seqlens_k": SEQLENS, "out": np.full(len(SEQLENS) * n, 0xDEADBEEF, np.uint32)}
    params = {"count": len(SEQLENS), "seq": seq, "keySeq": key_seq}
    return run(kernel, buffers, params)["out"].reshape(len(SEQLENS), n).astype(np.int64)


@pytest.mark.parametrize("run", BACKENDS)
@pytest.mark.parametrize("seq,key_seq", SHAPES)
def test_append_window_matches_reference(run, seq, key_seq):
    got = _run(run, "append", seq, key_seq)
    start, end = ref.share_window(SEQLENS, key_seq, seq)
    np.testing.assert_array_equal(got, np.stack([start, end, 0 * start], axis=1))


@pytest.mark.parametrize("run", BACKENDS)
@pytest.mark.parametrize("seq,key_seq", SHAPES_OVER)
def test_append_window_over_capacity_keeps_newest(run, seq, key_seq):
    # The whole cache takes the newest `seq` new tokens; the first keySeq - seq are dropped.
    got = _run(run, "append", seq, key_seq)
    want = np.broadcast_to([0, seq, key_seq - seq], got.shape)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("run", BACKENDS)
@pytest.mark.parametrize("seq,key_seq", SHAPES + SHAPES_OVER)
def test_sliding_window_matches_reference(run, seq, key_seq):
    got = _run(run, "sliding", seq, key_seq)
    p = ref.window_plan(SEQLENS, key_seq, seq)
    past_evicted = np.minimum(p.evicted, p.resident_before)
    want = np.stack(
        [p.abs_total - key_seq, past_evicted, p.append_start, p.kept, p.new_dropped], axis=1
    )
    np.testing.assert_array_equal(got, want)


def test_sliding_window_invariants_numpy():
    """The comments' invariants hold over a grid: every subtraction is of a smaller number."""
    s = np.arange(-3, 40)[:, None, None]
    cap = np.arange(1, 12)[None, :, None]
    n = np.arange(1, 15)[None, None, :]
    abs_total = np.maximum(n, s + 1)
    resident = np.minimum(abs_total, cap)
    fresh = np.minimum(n, cap)
    append_start = resident - fresh
    assert (append_start >= 0).all()
    assert (np.minimum(abs_total - n, cap) >= append_start).all()
