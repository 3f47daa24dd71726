"""The paged modes beyond the catalog's random cases: what a host's bad table does (the
interpreter's out-of-bounds and race findings, the runtime's size check), config errors, and a
sliding window that moves no K/V byte while appends and reads through the table go on."""

from __future__ import annotations

import re

import numpy as np
import pytest

from kvdsl import interp
from kvdsl.harness.paged import pool_buffers
from kvdsl.interp import OutOfBounds, RaceError
from kvdsl.kernels.config import ConfigError
from kvdsl.kernels.paged import (
    Addressing,
    PagedAppendConfig,
    PagedReadConfig,
    Pool,
)
from kvdsl.kernels.paged_append import paged_append
from kvdsl.kernels.paged_read import paged_read
from kvdsl.kernels.paged_pages import PagedCopyConfig, PagedWindowConfig, paged_copy, paged_window
from kvdsl.nodes.paged import PageLayout
from kvdsl.reference import paged as ref
from kvdsl.reference.judge import poison, values
from kvdsl.reference.modes import Rotary
from kvdsl.runtime.contract import check_contract
from kvdsl.runtime.errors import BufferError

H, D, P = 2, 16, 16
SMALL = {"kv_heads": H, "head_dim": D, "page_size": P}


def _append_inputs(rng, batch: int, key_seq: int) -> dict[str, np.ndarray]:
    return {
        "src_k": values(rng, batch * key_seq * H * D, np.float32),
        "src_v": values(rng, batch * key_seq * H * D, np.float32),
    }


def _slot_append(slots: list[int], pages: int):
    """A slot-mapping append of one batch of ``len(slots)`` tokens into ``pages`` pages."""
    rng = np.random.default_rng(1)
    cfg = PagedAppendConfig(**SMALL)
    bufs = _append_inputs(rng, 1, len(slots))
    bufs["slot_mapping"] = np.array(slots, np.int32)
    bufs |= {n: poison(pages * P * H * D, np.float32) for n in ("key_pages", "value_pages")}
    params = {"count": len(slots) * H, "keySeq": len(slots)}
    return paged_append(cfg), bufs, params


def test_a_slot_past_the_pool_is_out_of_bounds():
    # Slot 2 * P + 3 lies in page 2 of a two-page pool.
    kernel, bufs, params = _slot_append([5, 2 * P + 3, -1], pages=2)
    with pytest.raises(OutOfBounds, match=r"^key_pages\[\d+\] is out of bounds \(length 256\)"):
        interp.run(kernel, bufs, params)
    # A host that checks the contract first is told by name before any dispatch.
    with pytest.raises(BufferError, match="binding 'key_pages'"):
        check_contract(kernel, bufs, params)
    # The same table within the pool runs, writing tokens 0 and 1 only.
    bufs["slot_mapping"] = np.array([5, P + 3, -1], np.int32)
    check_contract(kernel, bufs, params)
    out = interp.run(kernel, bufs, params)
    written = ~np.isnan(out["key_pages"].reshape(2 * P, H, D)[:, 0, 0])
    assert np.flatnonzero(written).tolist() == [5, P + 3]


def test_a_page_id_past_the_pool_is_out_of_bounds():
    rng = np.random.default_rng(2)
    cfg = PagedAppendConfig(**SMALL, addressing=Addressing.PAGE_TABLE, page_layout="hnd")
    bufs = _append_inputs(rng, 2, 3)
    bufs["seqlens_k"] = np.array([2, P], np.int32)  # sequence 1: positions P-2 .. P
    bufs["page_table"] = np.array([[0, -1], [1, 7]], np.int32).reshape(-1)  # page 7 of 3
    bufs |= {n: poison(3 * P * H * D, np.float32) for n in ("key_pages", "value_pages")}
    params = {"count": 2 * H * 3, "keySeq": 3, "maxPages": 2}
    with pytest.raises(OutOfBounds, match=r"^key_pages\[\d+\] is out of bounds \(length 384\)"):
        interp.run(paged_append(cfg), bufs, params)
    bufs["page_table"][3] = 2
    out = interp.run(paged_append(cfg), bufs, params)
    k = ref.pool_pages((out["key_pages"], out["value_pages"]), H, P, D, "hnd", "separate")[0]
    src = bufs["src_k"].reshape(2, 3, H, D)
    np.testing.assert_array_equal(k[0, :3], src[0])  # positions 0..2 of sequence 0
    np.testing.assert_array_equal(k[1, P - 2 :], src[1, :2])  # positions P-2, P-1 of sequence 1
    np.testing.assert_array_equal(k[2, 0], src[1, 2])  # and position P, in its second page


def test_two_tokens_in_one_slot_are_a_race():
    kernel, bufs, params = _slot_append([3, 9, 3], pages=1)
    with pytest.raises(RaceError) as e:
        interp.run(kernel, bufs, params)
    msg = str(e.value)
    assert re.match(r"(key|value)_pages\[\d+\]: ", msg), msg
    with pytest.raises(ValueError, match="two tokens are mapped to one slot"):
        ref.append(1, P, np.zeros((3, H, D)), np.zeros((3, H, D)), np.array([3, 9, 3]))


def test_two_copies_onto_one_page_are_a_race():
    rng = np.random.default_rng(3)
    cfg = PagedCopyConfig(**SMALL, pool=Pool.COMBINED)
    pool = values(rng, 4 * 2 * P * H * D, np.float32)
    pairs = np.array([[0, 1], [2, 1]], np.int32).reshape(-1)  # page 1 written twice
    with pytest.raises(RaceError, match=r"^kv_pages\[\d+\]"):
        interp.run(paged_copy(cfg), {"page_pairs": pairs, "kv_pages": pool}, {"count": 2})
    for bad in ([[0, 1], [2, 1]], [[0, 1], [1, 2]]):  # written twice; written and read
        with pytest.raises(ValueError, match="copied to twice, or copied to and from"):
            ref.copy_pages(pool.reshape(4, -1), pool.reshape(4, -1), np.array(bad))
    ok = np.array([[0, 1], [3, 2]], np.int32).reshape(-1)
    out = interp.run(paged_copy(cfg), {"page_pairs": ok, "kv_pages": pool}, {"count": 2})
    pages = pool.reshape(4, -1)
    want = pages[[0, 0, 3, 3]]
    np.testing.assert_array_equal(out["kv_pages"].reshape(4, -1), want)


@pytest.mark.parametrize(
    "fields, field, allowed",
    [
        ({"page_size": 24}, "page_size", "a power of two from 16 to 256"),
        ({"page_size": 512}, "page_size", "a power of two from 16 to 256"),
        ({"page_layout": "nchw"}, "page_layout", "one of 'nhd', 'hnd'"),
        ({"pool": "shared"}, "pool", "one of 'separate', 'combined'"),
        ({"addressing": "block"}, "addressing", "one of 'slot_mapping', 'page_table'"),
        ({"format": "i32"}, "format", "one of 'f32', 'f16', 'int8'"),
        ({"scales": "side"}, "scales", "f32 and f16 rows have no scales"),
        ({"format": "q8_0", "scales": "side"}, "scales", "ggml's f16 scales"),
        ({"format": "int8", "pool": "combined"}, "pool", "'separate' for format 'int8'"),
        ({"format": "int4", "head_dim": 12}, "head_dim", "a multiple of 8 for format 'int4'"),
        (
            {"format": "int8", "scales": "side", "rotary": True, "addressing": "page_table"},
            "scales",
            "'inline' with rotary here (9 storage buffers, past WebGPU's default 8)",
        ),
        (
            {"format": "q8_0", "head_dim": 32, "k_norm": True, "rotary": True},
            "k_norm",
            "false with rotary for format 'q8_0' (its K and V pools are separate: 9 storage",
        ),
        ({"head_dim": 18}, "head_dim", "a multiple of 4"),
        ({"k_norm": True, "rotary": True}, "pool", "'combined' with k_norm and rotary (9 storage"),
        ({"rotary": True, "rotary_half": 6}, "rotary_half", "a multiple of 4 for paged_append"),
        ({"window": True}, "window", "a paged pool is bound whole"),
    ],
)
def test_config_errors_name_the_field(fields, field, allowed):
    with pytest.raises(ConfigError) as e:
        PagedAppendConfig(**(SMALL | fields))
    assert e.value.field == field and allowed in e.value.allowed, e.value


def test_the_knorm_rotary_append_fits_eight_bindings_in_one_pool():
    cfg = PagedAppendConfig(
        **SMALL, pool=Pool.COMBINED, addressing=Addressing.SLOT_MAPPING, k_norm=True, rotary=True
    )
    assert len(paged_append(cfg).bindings) == 8


def test_the_window_moves_no_kv_byte_and_appends_go_on():
    """Sequences appended through a page table, then slid to a window of ``W`` tokens (pages
    released, nothing moved), then appended again: the pools are bit-identical across the
    window's dispatch, the released pages go to ``freed_pages``, and a read of the window gives
    each kept token rotated at its own position."""
    rng = np.random.default_rng(4)
    batch, pages, max_pages, window = 2, 8, 4, P + 3
    geo = {"page_layout": PageLayout.HND, "addressing": Addressing.PAGE_TABLE}
    append = paged_append(PagedAppendConfig(**SMALL, **geo, rotary=True))
    read = paged_read(PagedReadConfig(**SMALL, **geo))
    slide = paged_window(PagedWindowConfig(page_size=P))
    table = np.array([[5, 2, 7, -1], [0, 6, 3, -1]], np.int32)
    theta = rng.uniform(0, 2 * np.pi, (max_pages * P, D // 2))
    rot = Rotary(np.cos(theta).astype(np.float32), np.sin(theta).astype(np.float32))
    pools = {n: poison(pages * P * H * D, np.float32) for n in ("key_pages", "value_pages")}
    model_k = np.zeros((batch, max_pages * P, H, D), np.float32)
    model_v = np.zeros_like(model_k)

    def step(lengths: list[int], key_seq: int) -> None:
        seqlens = np.array(lengths, np.int32) - 1
        bufs = _append_inputs(rng, batch, key_seq) | pools
        bufs |= {"seqlens_k": seqlens, "page_table": table.reshape(-1)}
        bufs |= {"cos_cache": rot.cos.reshape(-1), "sin_cache": rot.sin.reshape(-1)}
        params = {"count": batch * H * key_seq, "keySeq": key_seq, "maxPages": max_pages}
        pools.update(interp.run(append, bufs, params))
        new_k = bufs["src_k"].reshape(batch, key_seq, H, D)
        new_v = bufs["src_v"].reshape(batch, key_seq, H, D)
        for b, n in enumerate(lengths):
            fresh = min(key_seq, n)  # a shorter first prompt is right-padded
            pos = np.arange(n - fresh, n)
            model_k[b, pos] = ref.prepare_k(new_k[b, :fresh], pos[:, None], None, rot)
            model_v[b, pos] = new_v[b, :fresh]

    step([2 * P + 1, P + 3], 2 * P + 1)  # first prompts (sequence 1 right-padded)
    step([2 * P + 4, P + 6], 3)
    lengths = np.array([2 * P + 4, P + 6])
    before = {n: a.copy() for n, a in pools.items()}
    bufs = {"seqlens_k": (lengths - 1).astype(np.int32), "page_table": table.reshape(-1)}
    bufs |= {"freed_pages": poison(table.size, np.int32)} | pools
    assert not {"key_pages", "value_pages"} & {b.name for b in slide.bindings}
    out = interp.run(slide, bufs, {"count": table.size, "maxPages": max_pages, "window": window})
    for name in pools:  # not a K/V byte written
        assert np.array_equal(before[name].view(np.uint32), pools[name].view(np.uint32)), name
    want_table, want_freed = ref.window(table, lengths - 1, window, P)
    np.testing.assert_array_equal(out["page_table"].reshape(batch, -1), want_table)
    np.testing.assert_array_equal(out["freed_pages"].reshape(batch, -1), want_freed)
    assert want_freed.tolist() == [[5, -1, -1, -1], [-1, -1, -1, -1]]
    table[:] = want_table
    step([2 * P + 6, P + 9], 3)  # appends after the window reach the same pages
    lengths = np.array([2 * P + 6, P + 9])

    seq = max_pages * P
    bufs = {"seqlens_k": (lengths - 1).astype(np.int32), "page_table": table.reshape(-1)}
    bufs |= pools | {n: poison(batch * H * seq * D, np.float32) for n in ("key", "value")}
    got = interp.run(read, bufs, {"count": batch * H * seq, "seq": seq, "maxPages": max_pages})
    for name, model in (("key", model_k), ("value", model_v)):
        rows = got[name].reshape(batch, H, seq, D).transpose(0, 2, 1, 3)
        for b, n in enumerate(lengths):
            first = P if b == 0 else 0  # sequence 0's first page was released
            kept = rows[b, first:n]
            tol = 2e-6 if name == "key" else 0
            np.testing.assert_allclose(kept, model[b, first:n], rtol=tol, atol=tol)
            assert np.isnan(rows[b, :first]).all() and np.isnan(rows[b, n:]).all()
    pool_k = ref.pool_pages((pools["key_pages"], pools["value_pages"]), H, P, D, "hnd", "separate")
    assert not np.isnan(pool_k[0][5]).any()  # the released page still holds its tokens


def test_pool_buffers_follow_the_geometry():
    """Element ``(page, slot, head, d)`` of a pool sits where :class:`PageGeometry` says, in
    each layout, in separate and combined pools."""
    rng = np.random.default_rng(5)
    k = rng.standard_normal((3, P, H, D)).astype(np.float32)
    v = rng.standard_normal((3, P, H, D)).astype(np.float32)
    for layout in PageLayout:
        for pool in Pool:
            cfg = PagedAppendConfig(**SMALL, page_layout=layout, pool=pool)
            g = cfg.geometry
            arrays = pool_buffers(cfg, k, v)
            first = arrays["kv_pages" if pool is Pool.COMBINED else "key_pages"]
            second = arrays["kv_pages" if pool is Pool.COMBINED else "value_pages"]
            extra = g.page_units * 4 if pool is Pool.COMBINED else 0
            for page, slot, head in [(0, 0, 0), (2, 5, 1), (1, P - 1, H - 1)]:
                at = page * g.stride * 4 + g.offset(slot, head) * 4
                np.testing.assert_array_equal(first[at : at + D], k[page, slot, head])
                np.testing.assert_array_equal(
                    second[at + extra : at + extra + D], v[page, slot, head]
                )
            back = ref.pool_pages(tuple(arrays.values()), H, P, D, layout.value, pool.value)
            np.testing.assert_array_equal(back[0], k)
            np.testing.assert_array_equal(back[1], v)
