"""The paged model (kvdsl/reference/paged.py) on hand-worked tables: where a step's tokens land
through a page table, the pools' layouts, gather, page copy, compaction and the window."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl.reference import paged as ref

P = 4  # tokens per page


def test_table_places_follow_the_sequence_positions():
    # Sequence 0: 6 tokens after the step, 3 new (positions 3, 4, 5: pages 0 and 1).
    # Sequence 1: a first prompt of 2 tokens right-padded to 3 (positions 0, 1; the pad skipped).
    # Sequence 2: empty. Sequence 3: 9 tokens, its page 1 released (-1): positions 6, 7 skipped.
    table = np.array([[7, 2, -1], [5, -1, -1], [-1, -1, -1], [0, -1, 3]], np.int32)
    seqlens = np.array([5, 1, -1, 8], np.int32)
    slots, pos = ref.table_places(table, seqlens, 3, P)
    assert pos.tolist() == [[3, 4, 5], [0, 1, 0], [0, 0, 0], [6, 7, 8]]
    assert slots.tolist() == [[7 * P + 3, 2 * P, 2 * P + 1], [5 * P, 5 * P + 1, -1],
                              [-1, -1, -1], [-1, -1, 3 * P]]  # fmt: skip


@pytest.mark.parametrize("layout", ["nhd", "hnd"])
@pytest.mark.parametrize("pool", ["separate", "combined"])
def test_pool_arrays_round_trip_and_lay_rows_out(layout, pool):
    pages, h, d = 3, 2, 5
    k = np.arange(pages * P * h * d, dtype=np.float32).reshape(pages, P, h, d)
    v = -k
    arrays = ref.pool_arrays(k, v, layout, pool)
    back = ref.pool_pages(arrays, h, P, d, layout, pool)
    np.testing.assert_array_equal(back[0], k)
    np.testing.assert_array_equal(back[1], v)
    page = P * h * d
    kv = arrays[0]
    # Row (page 2, slot 1, head 1): where docs/modes.md draws it.
    inside = (1 * h + 1) * d if layout == "nhd" else (1 * P + 1) * d
    stride = 2 * page if pool == "combined" else page
    at = 2 * stride + inside
    np.testing.assert_array_equal(kv[at : at + d], k[2, 1, 1])
    vs = kv if pool == "combined" else arrays[1]
    v_at = at + (page if pool == "combined" else 0)
    np.testing.assert_array_equal(vs[v_at : v_at + d], v[2, 1, 1])


def test_append_scatters_and_refuses_one_slot_twice():
    rng = np.random.default_rng(0)
    k = rng.standard_normal((3, 2, 4)).astype(np.float32)
    w = ref.append(2, P, k, -k, np.array([6, -1, 1]))
    assert w.mask.reshape(2 * P, -1).any(axis=1).nonzero()[0].tolist() == [1, 6]
    np.testing.assert_array_equal(w.key.reshape(2 * P, 2, 4)[6], k[0])
    np.testing.assert_array_equal(w.value.reshape(2 * P, 2, 4)[1], -k[2])
    with pytest.raises(ValueError, match="two tokens are mapped to one slot"):
        ref.append(2, P, k, k, np.array([3, 0, 3]))


def test_gather_reads_slots_and_skips_negative_ones():
    k = np.arange(2 * P * 1 * 2, dtype=np.float32).reshape(2, P, 1, 2)
    rows_k, rows_v, live = ref.gather(k, k + 100, np.array([[5, -1], [5, 0]]))
    assert live.tolist() == [[True, False], [True, True]]
    np.testing.assert_array_equal(rows_k[0, 0], k[1, 1])
    np.testing.assert_array_equal(rows_v[1, 1], k[0, 0] + 100)


def test_copy_and_compact_move_whole_pages():
    k = np.arange(4 * P * 2, dtype=np.float32).reshape(4, P, 1, 2)
    w = ref.copy_pages(k, -k, np.array([[0, 3], [1, 2]]))
    np.testing.assert_array_equal(w.key[[2, 3]], k[[1, 0]])
    assert w.mask[[2, 3]].all() and not w.mask[[0, 1]].any()
    ck, cv = ref.compact(k, -k, np.array([3, 1]))
    np.testing.assert_array_equal(ck, k[[3, 1]])
    np.testing.assert_array_equal(cv, -k[[3, 1]])


def test_the_window_releases_whole_pages_only():
    table = np.array([[4, 9, 2, -1], [1, 0, -1, -1], [6, 3, 8, 5]], np.int32)
    # Totals 11, 6, 16 with a window of 5: sequence 0 keeps [6, 11): page 0 ([0, 4)) goes,
    # page 1 ([4, 8)) holds kept tokens; sequence 1 keeps [1, 6): nothing goes; sequence 2
    # keeps [11, 16): pages 0 and 1 go.
    new, freed = ref.window(table, np.array([10, 5, 15]), 5, P)
    assert new.tolist() == [[-1, 9, 2, -1], [1, 0, -1, -1], [-1, -1, 8, 5]]
    assert freed.tolist() == [[4, -1, -1, -1], [-1, -1, -1, -1], [6, 3, -1, -1]]
