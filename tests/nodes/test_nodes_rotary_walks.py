"""The rotary and walk nodes alone, each in a tiny kernel, on the interpreter and the GPU."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import interp, runtime
from kvdsl.ir import Dispatch, KernelBuilder, array, f32, u32
from kvdsl.nodes import walks
from kvdsl.nodes.rotary import Rotation, rotate, rotate_row
from kvdsl.reference import rotate_neox
from kvdsl.reference.judge import poison

BACKENDS = [interp.run, runtime.run]


def rotary_kernel(per_row: bool, half: int):
    """Row i of ``src`` (2*half values) rotated at position ``pos[i]`` into ``dst``."""
    kb = KernelBuilder("rotary", 16)
    src = kb.binding("src", f32, "read")
    pos = kb.binding("pos", u32, "read")
    cos = kb.binding("cos_cache", f32, "read")
    sin = kb.binding("sin_cache", f32, "read")
    dst = kb.binding("dst", f32, "read_write")
    HALF = kb.const("HALF", u32, half)
    rows = kb.param("count")
    if per_row:
        i = walks.per_row(kb, 65535, rows)
        row = kb.var("k", array(f32, 2 * half))
        with walks.row_elements(kb, 2 * HALF) as d:
            row[d] = src[i * 2 * HALF + d]
        rotate_row(kb, row, Rotation(cos, sin, pos[i], HALF))
        with walks.row_elements(kb, 2 * HALF, "j") as j:
            dst[i * 2 * HALF + j] = row[j]
        items = rows
    else:
        e = kb.let("e", kb.gid.x)
        with kb.if_(e >= rows * 2 * HALF):
            kb.ret()
        i = kb.let("i", e / (2 * HALF))
        d = kb.let("dd", e % (2 * HALF))
        dst[e] = rotate(kb, src, i * 2 * HALF, d, Rotation(cos, sin, pos[i], HALF))
        items = rows * 2 * HALF
    return kb.build(Dispatch(items.node, 16, 65535))


@pytest.mark.parametrize("run", BACKENDS, ids=["interp", "gpu"])
@pytest.mark.parametrize("per_row", [True, False], ids=["per_row", "element"])
@pytest.mark.parametrize("half", [1, 3, 16])
def test_rotary_matches_reference(gpu, run, per_row, half):
    rng = np.random.default_rng(half)
    rows, positions = 37, 50
    x = rng.uniform(0.25, 2, (rows, 2 * half)) * rng.choice([-1, 1], (rows, 2 * half))
    x = x.astype(np.float32)
    theta = rng.uniform(0, 2 * np.pi, (positions, half))
    cos, sin = np.cos(theta).astype(np.float32), np.sin(theta).astype(np.float32)
    pos = rng.integers(0, positions, rows).astype(np.uint32)
    bufs = {"src": x.ravel(), "pos": pos, "cos_cache": cos.ravel(), "sin_cache": sin.ravel()}
    bufs["dst"] = poison(x.size, np.float32)
    out = run(rotary_kernel(per_row, half), bufs, {"count": rows})["dst"].reshape(rows, 2 * half)
    want = rotate_neox(x[:, None, :], pos[:, None], cos, sin)[:, 0]
    np.testing.assert_allclose(out, want, rtol=2e-6, atol=2e-6)
    # The rotation preserves each pair's norm.
    pairs = lambda a: a[:, :half] ** 2 + a[:, half:] ** 2  # noqa: E731
    np.testing.assert_allclose(pairs(out), pairs(x), rtol=1e-5)


def walk_kernel(walk: str, wg: int, row_len: int, fold: int):
    """Each element of ``rows * row_len`` records the (workgroup, lane) that touched it."""
    kb = KernelBuilder(f"walk_{walk}", wg)
    who = kb.binding("who", u32, "read_write")
    kb.workgroup_const("WG")
    rows = kb.param("count")
    n = kb.const("ROW_LEN", u32, row_len)
    if walk == "per_row":
        i = walks.per_row(kb, fold, rows)
        with walks.row_elements(kb, n) as d:
            who[i * n + d] = i
    else:  # the block walk: the per-row dispatch, adjacent lanes on adjacent elements
        it = walks.vectors(kb, fold, rows, n, 1, blocks=True)
        who[it.e] = (kb.wid.x + kb.wid.y * fold) * 1000 + kb.lid.x
    return kb.build(Dispatch(rows.node, wg, fold))


@pytest.mark.parametrize("run", BACKENDS, ids=["interp", "gpu"])
@pytest.mark.parametrize("walk", ["per_row", "block"])
@pytest.mark.parametrize("rows", [1, 7, 8, 29])
def test_walks_touch_every_element_once(gpu, run, walk, rows):
    """Every element written exactly once (the interpreter would report a race otherwise),
    nothing past the rows, and the block walk puts adjacent lanes on adjacent elements."""
    wg, row_len, fold = 4, 6, 2
    k = walk_kernel(walk, wg, row_len, fold)
    total = rows * row_len
    out = run(k, {"who": poison(total + 5, np.uint32)}, {"count": rows})["who"]
    assert np.all(out[total:] == poison(5, np.uint32))
    e = np.arange(total)
    if walk == "per_row":
        assert np.array_equal(out[:total], e // row_len)
    else:  # each workgroup owns wg rows, walked by block_lanes invocations
        lanes = walks.block_lanes(wg, row_len)
        assert k.workgroup_size == (lanes, 1, 1) and lanes > wg
        group, lane = e // (wg * row_len), e % (wg * row_len) % lanes
        assert np.array_equal(out[:total], group * 1000 + lane)


@pytest.mark.parametrize(
    "wg, per_row, whole_rows, lanes",
    [
        (64, 32, False, 256),  # the catalog's drop-ins: 2,048 items, 8 steps of 256
        (64, 16, True, 256),
        (4, 6, False, 24),  # the whole block in one step
        (256, 1, False, 256),
        (64, 25, False, 200),  # 1,600 items: the largest divisor up to 256
        (100, 25, False, 250),
        (64, 24, False, 256),
        (64, 24, True, 192),  # K RMSNorm: whole rows of 24 per step
        (64, None, False, 64),  # items per row not known when building: the template's lanes
        (4, 300, True, 4),  # no multiple of a row up to 256: the template's lanes
        (250, 3, False, 250),  # no divisor of 750 between 250 and 256
    ],
)
def test_block_lanes(wg, per_row, whole_rows, lanes):
    """The block walk's invocations per workgroup divide its block's items (whole rows where
    asked), up to BLOCK_LANES, or are the template's."""
    assert walks.block_lanes(wg, per_row, whole_rows) == lanes
    if lanes != wg:
        assert wg < lanes <= walks.BLOCK_LANES and (wg * per_row) % lanes == 0
        assert not whole_rows or lanes % per_row == 0
