"""The writers' Walsh-Hadamard rotation of rows that several lanes hold
(:func:`kvdsl.nodes.rotation.across_lanes`) alone, in a tiny kernel on the interpreter and the
GPU: each layout of a row over its lanes (the quantiser's runs, paired runs, strided words, and
layouts no writer has: two rounds through workgroup memory, lanes not a power of two) gives
the reference's rows bit for bit; a layout whose pairs are not lane-aligned is refused."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

from kvdsl import interp, runtime
from kvdsl.ir import Dispatch, KernelBuilder, f32, min_, vec
from kvdsl.nodes import rotation
from kvdsl.reference.judge import poison
from kvdsl.reference.rotation import Rotation, signs
from tests.helpers.backends import assert_as_numpy

BACKENDS = [interp.run, runtime.run]

#: name -> (lanes, vectors a lane, block, the row's vector lane l holds as its j-th).
LAYOUTS: dict[str, tuple[int, int, int, Callable[[Any, int], Any]]] = {
    "runs of 2 over 4 lanes": (4, 2, 32, lambda lane, j: lane * 2 + j),
    "runs, blocks of 16 (two blocks a row)": (4, 2, 16, lambda lane, j: lane * 2 + j),
    "paired runs of 4 over 4 lanes": (
        4,
        4,
        64,
        lambda lane, j: lane * 2 + j % 2 + (8 if j >= 2 else 0),
    ),
    "strided int8 words": (4, 2, 32, lambda lane, j: lane + 4 * j),
    "strided 4-bit words": (2, 4, 32, lambda lane, j: (lane + 2 * (j // 2)) * 2 + j % 2),
    "lane, register, lane: two rounds": (
        4,
        2,
        32,
        lambda lane, j: (lane & 1) | (j << 1) | ((lane >> 1) << 2),
    ),
    "one lane a row": (1, 4, 16, lambda lane, j: j),
    "6 lanes a row, blocks of 8": (6, 1, 8, lambda lane, j: lane),
}


def lanes_kernel(lanes: int, n: int, block: int, at: Callable[[Any, int], Any]):
    """Rows of ``src`` (``lanes * n`` vectors) rotated into ``dst`` by ``lanes`` invocations
    each; the lanes past the last row rotate a copy of it (they meet the barrier) and store
    nothing."""
    d4 = lanes * n
    wg = 4 * lanes
    kb = KernelBuilder("rotate_lanes", wg)
    src = kb.binding("src", vec(4, f32), "read")
    dst = kb.binding("dst", vec(4, f32), "read_write")
    rows = kb.param("count")
    e = kb.let("e", kb.gid.x)
    lane = kb.let("lane", e % lanes)
    row = kb.let("row", e / lanes)
    base = kb.let("base", min_(row, rows - 1) * d4)
    x = [kb.let(f"x{j}", src[base + at(lane, j)]) for j in range(n)]
    y = rotation.across_lanes(kb, x, at, lane, lanes, block, wg)
    with kb.if_(row < rows):
        for j in range(n):
            dst[row * d4 + at(lane, j)] = y[j]
    return kb.build(Dispatch((rows * lanes).node, wg, 65535))


@pytest.mark.parametrize("run", BACKENDS, ids=["interp", "gpu"])
@pytest.mark.parametrize("name", LAYOUTS)
def test_the_lanes_rotate_a_row_as_the_reference_does(gpu, run, name):
    lanes, n, block, at = LAYOUTS[name]
    d = 4 * lanes * n
    rows = 7  # the last workgroup partly past the end
    x = np.random.default_rng(3).standard_normal((rows, d)).astype(np.float32) * 3
    x[:, 1] *= 40.0  # a large channel
    bufs = {"src": x.reshape(-1), "dst": poison(rows * d + 8, np.float32)}
    out = run(lanes_kernel(lanes, n, block, at), bufs, {"count": rows})["dst"]
    want = Rotation(d, block, signs(d)).rotate(x)  # (a row of 24: no power of two)
    assert want.dtype == np.float32
    assert_as_numpy(out[: rows * d], want.reshape(-1), run)  # bit for bit but on a fusing GPU
    assert np.array_equal(out[rows * d :].view(np.uint32), poison(8, np.float32).view(np.uint32))


def test_the_plan_does_in_registers_what_a_lane_holds():
    runs = rotation.plan(lambda lane, j: lane * 2 + j, 4, 2, 32)
    assert [(s.h, s.pairs, s.mask) for s in runs] == [(1, ((0, 1),), 0), (2, (), 1), (4, (), 2)]
    assert rotation.exchange_bytes(lambda lane, j: lane * 2 + j, 4, 2, 32, 64) == 16 * 64 * 2
    assert rotation.exchange_bytes(lambda lane, j: lane * 2 + j, 4, 2, 8, 64) == 0


def test_a_layout_whose_pairs_are_not_lane_aligned_is_refused():
    # Lane 0 holds vectors 0 and 3, lane 1 vectors 1 and 2: the pairs 4 values apart (0, 1)
    # cross lanes, the pairs (2, 3) too, but with lane 1 as the low half of one of them.
    with pytest.raises(ValueError) as err:
        rotation.plan(lambda lane, j: [[0, 3], [1, 2]][lane][j], 2, 2, 16)
    assert "the pairs 4 values apart are not lane-aligned" in str(err.value)
