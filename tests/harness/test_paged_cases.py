"""The paged modes' verification cases (kvdsl/harness/paged.py): the tables are what an
allocator leaves (page ids shuffled over a larger pool, forks sharing prefix pages, ragged and
empty sequences, released pages and skipped slots), every input matches its binding, outputs
start poisoned, and a wrong element is caught."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import catalog
from kvdsl.harness import cases_for
from kvdsl.kernels.paged import Addressing, PagedAppendConfig, PagedReadConfig
from kvdsl.kernels.paged_pages import PagedCompactConfig, PagedCopyConfig, PagedWindowConfig
from kvdsl.reference.judge import POISON_BITS
from tests.helpers.case_outputs import reference_outputs

SMALL = {"kv_heads": 2, "head_dim": 32}
CONFIGS = {
    "append_table": PagedAppendConfig(**SMALL, addressing=Addressing.PAGE_TABLE, rotary=True),
    "append_slots_hnd_f16": PagedAppendConfig(**SMALL, page_layout="hnd", format="f16"),
    "append_int8_side": PagedAppendConfig(**SMALL, format="int8", scales="side"),
    "append_q8_0_table": PagedAppendConfig(**SMALL, format="q8_0", addressing="page_table"),
    "read_table_combined": PagedReadConfig(**SMALL, pool="combined"),
    "read_slots_int4": PagedReadConfig(**SMALL, format="int4", addressing="slot_mapping"),
    "copy": PagedCopyConfig(**SMALL, format="int4_asym", scales="side"),
    "compact": PagedCompactConfig(**SMALL, pool="combined", format="f16"),
    "window": PagedWindowConfig(page_size=32),
}


def _poisoned(a: np.ndarray) -> np.ndarray:
    return a.view(f"u{a.itemsize}") == POISON_BITS[a.itemsize]


@pytest.mark.parametrize("name", CONFIGS)
def test_cases_match_their_kernels(name):
    cfg = CONFIGS[name]
    kernel = catalog.build_config(cfg)
    bindings = {b.name: b for b in kernel.bindings}
    partial = 0
    for case in cases_for(cfg, 4, seed=2):
        assert set(case.buffers) == set(bindings), name
        assert set(case.params) == {n for n, _ in kernel.params.fields}, name
        for n, b in bindings.items():
            assert case.buffers[n].dtype == b.host.dtype, (name, n)
        for out, want in case.expected.items():
            assert case.buffers[out].size == want.size, (name, out)
            mask = case.written.get(out)
            if mask is not None:  # a pass that owns part of an output: the rest is poison
                assert _poisoned(case.buffers[out]).all(), (name, out)
                assert mask.any(), (name, out)
                partial += not mask.all()
    assert partial or not any(c.written for c in cases_for(cfg, 4, seed=2)), name


def _tables(cfg, n=6, seed=0):
    return [
        (c, c.buffers["page_table"].reshape(c.shape["batch"], -1)) for c in cases_for(cfg, n, seed)
    ]


def test_page_tables_are_shuffled_shared_ragged_and_have_holes():
    cfg = CONFIGS["append_table"]
    shuffled = shared = released = ragged = 0
    for case, table in _tables(cfg):
        ids = table[table >= 0]
        assert ids.max() < case.shape["pages"]
        shuffled += not np.array_equal(ids, np.sort(ids))
        shared += len(ids) > len(np.unique(ids))  # a fork's prefix pages
        total = case.buffers["seqlens_k"].astype(np.int64) + 1
        ragged += len(np.unique(total)) > 1 or (total < case.params["keySeq"]).any()
        needs = -(-np.maximum(total, 0) // cfg.page_size)
        released += any((table[b, : needs[b]] < 0).any() for b in range(len(total)))
    assert shuffled >= 4 and shared >= 2 and released >= 2 and ragged >= 4


def test_slot_mappings_skip_tokens_and_stay_in_the_pool():
    cfg = CONFIGS["append_slots_hnd_f16"]
    skipped = 0
    for case in cases_for(cfg, 6, seed=0):
        slots = case.buffers["slot_mapping"]
        live = slots[slots >= 0]
        assert len(np.unique(live)) == len(live)  # one token per slot: no race
        assert live.max(initial=0) < case.shape["pages"] * cfg.page_size
        skipped += (slots < 0).any()
    assert skipped >= 3


@pytest.mark.parametrize("name", CONFIGS)
def test_a_wrong_element_is_caught(name):
    cfg = CONFIGS[name]
    for case in cases_for(cfg, 3, seed=4):
        got = reference_outputs(case)
        assert case.against_reference(got) == [], name
        out = next(iter(case.expected))
        mask = case.written.get(out)
        i = int(np.flatnonzero(np.ones(got[out].size, bool) if mask is None else mask)[0])
        bad = {k: v.copy() for k, v in got.items()}
        x = bad[out].reshape(-1)
        if x.dtype.kind == "f":  # far past any tolerance
            x[i] = x[i] * x.dtype.type(2) + x.dtype.type(1)
        else:  # a code in a word's top byte moves by 64 steps
            x[i] ^= x.dtype.type(1 << 30)
        assert case.against_reference(bad), name
        written = {k: v.copy() for k, v in got.items()}
        if mask is not None and not mask.all():  # an element outside the pass written
            j = int(np.flatnonzero(~mask.reshape(-1))[0])
            written[out].reshape(-1)[j] = written[out].reshape(-1)[i]
            assert any("should not be" in p for p in case.against_reference(written)), name
