"""kvdsl.nodes.index: each function's IR, run in the interpreter, against indices worked out here
in numpy (``np.unravel_index`` / ``np.ravel_multi_index`` and the dispatch's workgroups by hand).

The flat index is checked over every invocation the dispatch rule launches: unbounded, each
launched invocation's ``i`` (the template's fold and the balanced rule, one row of workgroups and
several, a last row only partly needed); bounded, that exactly the invocations with ``i < count``
go on (the guard's edge: ``count - 1`` stays, ``count`` returns) and each ``i`` once.
"""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import interp
from kvdsl.emit import emit
from kvdsl.ir import Dispatch, KernelBuilder, u32
from kvdsl.ir.dispatch import workgroups
from kvdsl.nodes import index

WG, FOLD = 4, 4
POISON = 0xDEADBEEF

# count -> the workgroups (x, y) of the template's rule and of the balanced one, by hand:
# ceil(count / 4) groups; up to 4 in x; past that y = ceil(groups / 4) rows of 4 (template)
# or of ceil(groups / y) (balanced).
DISPATCHES = {
    1: ((1, 1), (1, 1)),  # one invocation of one workgroup: three return
    15: ((4, 1), (4, 1)),  # one row, the last invocation returns
    16: ((4, 1), (4, 1)),  # exactly fold workgroups, all needed
    17: ((4, 2), (3, 2)),  # one past: a second row (template: three idle workgroups)
    33: ((4, 3), (3, 3)),  # 9 groups
    48: ((4, 3), (4, 3)),  # 12 groups, whole rows
}


def _launched(x: int, y: int, balanced: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per launched invocation in slot order ``(wid.y * x + wid.x) * WG + lid.x``: its
    ``gid`` and the flat index the node should give (``gid.x + gid.y * width * WG``, width
    ``x`` balanced, ``FOLD`` for the template)."""
    wy, wx, lx = np.meshgrid(np.arange(y), np.arange(x), np.arange(WG), indexing="ij")
    gx, gy = (wx * WG + lx).ravel(), wy.ravel()
    return np.stack([gx, gy]), gx + gy * (x if balanced else FOLD) * WG


def flat_kernel(balanced: bool, bounded: bool, named_wg: bool):
    """Each launched invocation stores its flat index at its slot; bounded, only past the
    guard, and ``by_i[i]`` gets the slot + 1 (``by_i`` is ``count`` long: an invocation the guard
    lets through with ``i >= count`` would store out of bounds)."""
    kb = KernelBuilder("flat", WG)
    if named_wg:
        kb.workgroup_const()
    by_slot = kb.binding("by_slot", u32, "read_write")
    by_i = kb.binding("by_i", u32, "read_write") if bounded else None
    count = kb.param("count")
    slot = kb.let("slot", (kb.wid.y * kb.nwg.x + kb.wid.x) * WG + kb.lid.x)
    i = index.flat_index(kb, FOLD, bound=count if bounded else None, balanced=balanced)
    by_slot[slot] = i
    if bounded:
        by_i[i] = slot + 1
    return kb.build(Dispatch(count.node, WG, FOLD, balanced))


@pytest.mark.parametrize("named_wg", [False, True], ids=["literal_wg", "named_wg"])
@pytest.mark.parametrize("balanced", [False, True], ids=["template", "balanced"])
@pytest.mark.parametrize("count", sorted(DISPATCHES))
def test_flat_index_over_every_launched_invocation(count, balanced, named_wg):
    x, y = DISPATCHES[count][balanced]
    k = flat_kernel(balanced, False, named_wg)
    assert workgroups(k, {"count": count}) == (x, y, 1)
    n = x * y * WG
    gid, want = _launched(x, y, balanced)
    out = interp.run(k, {"by_slot": np.full(n, POISON, np.uint32)}, {"count": count})
    np.testing.assert_array_equal(out["by_slot"], want)
    # Every launched invocation a distinct index, the first n of them: nothing lost, none twice.
    np.testing.assert_array_equal(np.sort(want), np.arange(n))
    text = emit(k)
    width = "nwg.x" if balanced else str(FOLD) + "u"
    wg = "WG" if named_wg else f"{WG}u"
    assert f"let i = gid.x + gid.y * {width} * {wg};" in text, text


@pytest.mark.parametrize("balanced", [False, True], ids=["template", "balanced"])
@pytest.mark.parametrize("count", sorted(DISPATCHES))
def test_flat_index_guard_keeps_exactly_the_first_count(count, balanced):
    x, y = DISPATCHES[count][balanced]
    k = flat_kernel(balanced, True, False)
    n = x * y * WG
    bufs = {"by_slot": np.full(n, POISON, np.uint32), "by_i": np.full(count, POISON, np.uint32)}
    out = interp.run(k, bufs, {"count": count})
    _, i = _launched(x, y, balanced)
    kept = i < count
    want_slot = np.where(kept, i, POISON).astype(np.uint32)
    np.testing.assert_array_equal(out["by_slot"], want_slot)
    want_i = np.full(count, POISON, np.uint32)
    want_i[i[kept]] = np.flatnonzero(kept) + 1
    np.testing.assert_array_equal(out["by_i"], want_i)
    assert np.all(out["by_i"] != POISON)  # every i below count by some invocation
    assert (i == count - 1).sum() == 1 and kept[i == count - 1].all()  # the edge stays
    if n > count:
        assert not kept[i == count].any()  # and one past it returns


def test_flat_index_guard_with_a_bound_of_zero_keeps_nothing():
    k = flat_kernel(False, True, False)
    bufs = {"by_slot": np.full(8, POISON, np.uint32), "by_i": np.full(1, POISON, np.uint32)}
    out = interp.run(k, bufs, {"count": 0}, (2, 1, 1))
    assert np.all(out["by_slot"] == POISON) and out["by_i"][0] == POISON


@pytest.mark.parametrize("count", [17, 33, 48, None])
def test_workgroup_flat(count):
    """``wid.x + wid.y * fold`` whatever x the dispatch has (None: 2 × 3 workgroups given, x
    short of the fold, where reading ``nwg.x`` would differ)."""
    kb = KernelBuilder("wg_flat", WG)
    out = kb.binding("out", u32, "read_write")
    n = kb.param("count")
    slot = kb.let("slot", (kb.wid.y * kb.nwg.x + kb.wid.x) * WG + kb.lid.x)
    out[slot] = index.workgroup_flat(kb, FOLD) * 100 + kb.lid.x
    k = kb.build(Dispatch(n.node, WG, FOLD))
    x, y = DISPATCHES[count][0] if count else (2, 3)
    bufs = {"out": np.full(x * y * WG, POISON, np.uint32)}
    got = interp.run(k, bufs, {"count": count or 1}, (x, y, 1))["out"]
    wy, wx, lx = np.meshgrid(np.arange(y), np.arange(x), np.arange(WG), indexing="ij")
    np.testing.assert_array_equal(got, ((wy * FOLD + wx) * 100 + lx).ravel())


SHAPES = [  # (batch, heads, seq, head_dim): random non-zero sizes, and ones of 1
    tuple(int(v) for v in np.random.default_rng(seed).integers(1, 10, 4)) for seed in range(4)
] + [(1, 1, 1, 1), (2, 1, 9, 3), (1, 6, 1, 5)]


def rows_kernel():
    """Per row of ``batch × heads × seq`` (BNSH order): split_rows' ``(b, hk, t)``, and the
    row's first element in BNSH and in BSH."""
    kb = KernelBuilder("rows", WG)
    out = kb.binding("out", u32, "read_write")
    rows, heads, seq, d = (kb.param(p) for p in ("rows", "heads", "seq", "headDim"))
    row = index.flat_index(kb, 65535, "row", bound=rows)
    b, hk, t = index.split_rows(kb, row, heads, seq)
    hidden = kb.let("hidden", heads * d)
    for k, v in enumerate(
        (
            b,
            hk,
            t,
            index.bnsh(b, hk, t, heads, seq, d),
            index.bsh(b, t, hk, seq, hidden, d),
        )
    ):
        out[row * 5 + k] = v
    return kb.build(Dispatch(rows.node, WG, 65535))


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_split_rows_bnsh_bsh(shape):
    batch, heads, seq, d = shape
    rows = batch * heads * seq
    params = {"rows": rows, "heads": heads, "seq": seq, "headDim": d}
    got = interp.run(rows_kernel(), {"out": np.full(rows * 5, POISON, np.uint32)}, params)
    got = got["out"].reshape(rows, 5)
    b, h, t = np.unravel_index(np.arange(rows), (batch, heads, seq))
    np.testing.assert_array_equal(got[:, 0], b)
    np.testing.assert_array_equal(got[:, 1], h)
    np.testing.assert_array_equal(got[:, 2], t)
    zero = np.zeros(rows, int)
    bnsh = np.ravel_multi_index((b, h, t, zero), (batch, heads, seq, d))
    bsh = np.ravel_multi_index((b, t, h, zero), (batch, seq, heads, d))
    np.testing.assert_array_equal(got[:, 3], bnsh)
    np.testing.assert_array_equal(got[:, 4], bsh)


def test_split_rows_names_the_token():
    kb = KernelBuilder("names", WG)
    out = kb.binding("out", u32, "read_write")
    row = kb.let("row", kb.gid.x)
    b, hk, j = index.split_rows(kb, row, kb.param("heads"), kb.param("seq"), token="j")
    out[row] = (b * 100 + hk) * 100 + j
    text = emit(kb.build())
    for line in ("let j = row % params.seq;", "let tmp = row / params.seq;"):
        assert line in text, text
    assert "let hk = tmp % params.heads;" in text and "let b = tmp / params.heads;" in text
