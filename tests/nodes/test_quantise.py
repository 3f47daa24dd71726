"""kvdsl.nodes.quantise: the dense quantiser through a caller's own walk and destination hook
(a slot mapping, as a paged cache has), on the interpreter against the numpy reference."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import interp
from kvdsl.ir import KernelBuilder, convert, f32, i32, select, u32, vec
from kvdsl.nodes import formats, walks
from kvdsl.nodes.quantise import (
    Destination,
    Quantiser,
    RowPlace,
    cache_binding,
    quantise_rows,
)
from kvdsl.nodes.words import splat
from kvdsl.reference import formats as fm

POISON = 0xDEADBEEF


def slot_kernel(q: Quantiser):
    """Rows ``i`` of ``src_k``/``src_v`` quantised into cache row ``slots[i]`` (none where it
    is negative): the mapping a paged cache's slot table gives."""
    kb = KernelBuilder("slots", q.workgroup_size)
    src_k = kb.binding("src_k", vec(4, f32), "read")
    src_v = kb.binding("src_v", vec(4, f32), "read")
    slots = kb.binding("slots", i32, "read")
    key, value = cache_binding(kb, q, "key"), cache_binding(kb, q, "value")
    side = None if q.inline else kb.binding("scales", f32, "read_write")
    count = kb.param("count")
    lanes = kb.const("ROW_LANES", u32, q.lanes)
    rows = count * 2 if q.split else count
    it = walks.vectors(kb, 65535, rows, lanes, 1, guard=False)
    row, is_v = it.row, None
    if q.split:  # K's rows, then V's
        is_v = kb.let("isV", it.row >= count)
        row = kb.let("srcRow", select(it.row, it.row - count, is_v))
    base = kb.let("srcBase", row * (q.head_dim // 4))
    at = [base + q.vector_at(it.d, j) for j in range(q.vectors)]
    if q.split:
        k = [kb.var(f"x{j}", vec(4, f32)) for j in range(q.vectors)]
        with kb.if_(is_v):
            for j in range(q.vectors):
                k[j].set(src_v[at[j]])
        with kb.else_():
            for j in range(q.vectors):
                k[j].set(src_k[at[j]])
        v = None
    else:
        k = [kb.let(f"k{j}", src_k[at[j]]) for j in range(q.vectors)]
        v = [kb.let(f"v{j}", src_v[at[j]]) for j in range(q.vectors)]
    slot = kb.let("slot", slots[row])

    def place() -> RowPlace:
        row = kb.let("dst", convert(u32, slot))
        return RowPlace(row * q.row_words, None if side is None else row * q.side_words)

    skip = (it.e >= rows * lanes).lor(slot < 0)
    quantise_rows(kb, q, it.d, k, v, Destination(key, value, side, place, skip, is_v))
    return kb.build(walks.dispatch(rows, lanes, q.workgroup_size, 65535, blocks=False), "slots")


CASES = [
    ("int8", True, 128, {}),
    ("int8", False, 128, {"strided": True}),
    ("int4", False, 64, {}),
    ("int4_asym", True, 64, {"staged": True}),
    ("q8_0", True, 96, {}),
    ("q4_0", True, 96, {"staged": True}),
    ("int4_asym", False, 64, {"split": True}),
    ("int8", True, 128, {"split": True, "staged": True}),
    ("q8_0", True, 96, {"split": True}),
    ("int4", True, 64, {"split": True, "strided": True}),
]


@pytest.mark.parametrize("fmt, inline, d, walk", CASES, ids=lambda x: str(x))
def test_rows_land_at_their_slots_and_skipped_slots_stay_poisoned(fmt, inline, d, walk):
    lanes = Quantiser(formats.FORMATS[fmt], inline, d, 1).lanes
    q = Quantiser(formats.FORMATS[fmt], inline, d, 4 * lanes, **walk)  # four rows a workgroup
    rng = np.random.default_rng(3)
    rows, cap = 10, 16
    x = rng.standard_normal((2, rows, d)).astype(np.float32)
    x *= 10.0 ** rng.integers(-2, 3, (2, rows, 1))
    slots = rng.permutation(cap)[:rows].astype(np.int32)
    slots[[2, 7]] = -1
    kernel = slot_kernel(q)
    n = q.row_words
    bufs = {
        "src_k": x[0].reshape(-1),
        "src_v": x[1].reshape(-1),
        "slots": slots,
        "key": np.full(cap * n, POISON, np.uint32),
        "value": np.full(cap * n, POISON, np.uint32),
    }
    if not inline:
        bufs["scales"] = np.full(cap * q.side_words, np.nan, np.float32)
    out = interp.run(kernel, bufs, {"count": rows})
    for t, name in enumerate(("key", "value")):
        want_words, want_side = fm.quantize_rows(fmt, x[t], inline)
        got = out[name].reshape(cap, n)
        for i, s in enumerate(slots):
            if s >= 0:
                np.testing.assert_array_equal(got[s], want_words[i], err_msg=f"{name} row {i}")
        untouched = np.setdiff1d(np.arange(cap), slots[slots >= 0])
        assert (got[untouched] == POISON).all()
        if not inline:
            stats = want_side.shape[-1]
            side = out["scales"].reshape(cap, 2, stats)[:, t]
            np.testing.assert_array_equal(side[slots[slots >= 0]], want_side[slots >= 0])
            assert np.isnan(side[untouched]).all()


def test_the_quantiser_refuses_what_it_cannot_store():
    q = Quantiser(formats.FORMATS["int8"], False, 128, 64)
    kb = KernelBuilder("bad", 64)
    plain = kb.binding("key", u32, "read_write")
    dest = Destination(plain, plain, None, lambda: RowPlace(kb.lid.x), None)
    x = kb.let("x", kb.lid.x)
    with pytest.raises(ValueError, match="takes 4 vectors of K and of V per lane"):
        quantise_rows(kb, q, x, [], [], dest)
    with pytest.raises(ValueError, match="split rows .* take one tensor's values"):
        quantise_rows(kb, q, x, [], None, dest)
    vecs = [splat(vec(4, f32), 1.0)] * 4
    with pytest.raises(ValueError, match="scales side needs a side scales binding"):
        quantise_rows(kb, q, x, vecs, vecs, dest)
    scales = kb.binding("scales", f32, "read_write")
    dest = Destination(plain, plain, scales, lambda: RowPlace(kb.lid.x), None)
    with pytest.raises(ValueError, match="holds u32; format int8 with scales side stores"):
        quantise_rows(kb, q, x, vecs, vecs, dest)
