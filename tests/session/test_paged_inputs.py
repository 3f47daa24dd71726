"""Every paged runtime input a host can pass has a defined result: skipped as the kernel
documents (equal to the reference), or refused before any dispatch by the session's host
(:func:`kvdsl.session.check_pages`, a ``SessionError``) or by the contract's sizes
(:func:`kvdsl.session.check_dispatch`), each naming the input, the value and what is allowed.
Each row runs on the interpreter (each binding an exact copy of its range: a stray access is
``OutOfBounds``, two writers a ``RaceError``) and on the GPU, every page of the pools random
bytes that the pass must leave as they were unless it writes them (the canary pages: pages no
sequence owns), every binding between canaries of its own. Where a host skips the checks, the
interpreter shows what the refused input would have done. The table is docs/errors.md's
"Paged inputs"."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl.interp.errors import OutOfBounds, RaceError
from kvdsl.kernels.paged import Addressing, PagedAppendConfig, PagedReadConfig
from kvdsl.kernels.paged_pages import PagedCompactConfig, PagedCopyConfig
from kvdsl.reference import paged as ref
from kvdsl.reference.judge import poison, values
from kvdsl.runtime.errors import BufferError, ParamsError
from kvdsl.session import GpuHost, InterpHost, Program, SessionError, check_pages
from tests.helpers.session import host_class
from tests.session.test_inputs import dispatch

H, D, P, PAGES = 2, 8, 16, 6
SLOTS = PAGES * P
I32_MIN = -(2**31)

PROGRAMS = {
    "append slot_mapping": Program.of(PagedAppendConfig(H, D, page_size=P), "paged_append_sm"),
    "append page_table": Program.of(
        PagedAppendConfig(H, D, page_size=P, addressing=Addressing.PAGE_TABLE), "paged_append_pt"
    ),
    "read page_table": Program.of(
        PagedReadConfig(H, D, page_size=P, addressing=Addressing.PAGE_TABLE), "paged_read_pt"
    ),
    "copy": Program.of(PagedCopyConfig(H, D, page_size=P), "paged_copy"),
    "compact": Program.of(PagedCompactConfig(H, D, page_size=P), "paged_compact"),
}


def _pools(rng):
    """K and V pools ``[PAGES, P, H, D]`` of random values: every page a canary until written."""
    return [values(rng, (PAGES, P, H, D), np.float32) for _ in range(2)]


def append_slots(slots):
    """A slot-mapping append of 2 × 3 tokens to ``slots``: arrays, shape, params, seqlens,
    the inputs' values and the pools the reference leaves (a slot below -1 skipped as -1)."""
    rng = np.random.default_rng(11)
    slots = np.asarray(slots, np.int64)
    batch, key_seq = 2, 3
    new_k, new_v = (values(rng, (batch, key_seq, H * D), np.float32) for _ in range(2))
    k, v = _pools(rng)
    arrays = {"src_k": new_k, "src_v": new_v, "slot_mapping": slots.astype(np.int32)}
    arrays |= {"key_pages": k.reshape(-1), "value_pages": v.reshape(-1)}
    want = None
    flat = np.where(slots < 0, -1, slots)
    if flat.max() < SLOTS and len(np.unique(flat[flat >= 0])) == (flat >= 0).sum():
        w = ref.append(PAGES, P, new_k.reshape(-1, H, D), new_v.reshape(-1, H, D), flat)
        want = (np.where(w.mask, w.key, k), np.where(w.mask, w.value, v))
    shape = {"batch": batch, "keySeq": key_seq, "pages": PAGES}
    params = {"count": batch * H * key_seq, "keySeq": key_seq}
    return arrays, shape, params, None, {"slot_mapping": arrays["slot_mapping"]}, want


#: Two sequences: 20 tokens in pages 4, 1; 5 tokens in page 3 (page 0, 2 and 5 no one's).
TABLE = [[4, 1, -1], [3, -1, -1]]


def append_table(table=TABLE, seqlens=(21, 6), key_seq=2):
    """A page-table append of ``key_seq`` tokens per sequence: arrays, shape, params, seqlens,
    inputs, and the reference's pools (a page id below -1 skipped as -1)."""
    rng = np.random.default_rng(12)
    table = np.asarray(table, np.int32)
    seqlens = np.asarray(seqlens, np.int32)
    batch = len(seqlens)
    new_k, new_v = (values(rng, (batch, key_seq, H * D), np.float32) for _ in range(2))
    k, v = _pools(rng)
    arrays = {"src_k": new_k, "src_v": new_v, "seqlens_k": seqlens, "page_table": table}
    arrays |= {"key_pages": k.reshape(-1), "value_pages": v.reshape(-1)}
    want = None
    clean = np.where(table < 0, -1, table)
    if clean.max() < PAGES and int(np.max(seqlens)) + 1 <= table.shape[1] * P:
        slots, _ = ref.table_places(clean, seqlens, key_seq, P)
        flat = slots.reshape(-1)
        if len(np.unique(flat[flat >= 0])) == (flat >= 0).sum():
            w = ref.append(PAGES, P, new_k.reshape(-1, H, D), new_v.reshape(-1, H, D), flat)
            want = (np.where(w.mask, w.key, k), np.where(w.mask, w.value, v))
    m = table.shape[1]
    shape = {"batch": batch, "keySeq": key_seq, "pages": PAGES, "maxPages": m}
    params = {"count": batch * H * key_seq, "keySeq": key_seq, "maxPages": m}
    return arrays, shape, params, seqlens, {"page_table": table}, want


def copy_pairs(pairs):
    rng = np.random.default_rng(13)
    pairs = np.asarray(pairs, np.int32).reshape(-1, 2)
    k, v = _pools(rng)
    arrays = {"page_pairs": pairs.reshape(-1), "key_pages": k.reshape(-1)}
    arrays["value_pages"] = v.reshape(-1)
    live = pairs[(pairs >= 0).all(axis=1)]
    want = None
    if live.size == 0 or (live.max() < PAGES and len(np.unique(live[:, 1])) == len(live)
                          and not np.intersect1d(live[:, 0], live[:, 1]).size):  # fmt: skip
        w = ref.copy_pages(k, v, live)
        want = (w.key, w.value)
    shape = {"pages": PAGES, "copies": len(pairs)}
    return arrays, shape, {"count": len(pairs)}, None, {"page_pairs": pairs}, want


def compact_live(live):
    rng = np.random.default_rng(14)
    live = np.asarray(live, np.int32)
    n = len(live)
    k, v = _pools(rng)
    ck, cv = _pools(np.random.default_rng(15))
    arrays = {"live_pages": live, "key_pages": k.reshape(-1), "value_pages": v.reshape(-1)}
    arrays |= {"compact_key": ck[:n].reshape(-1), "compact_value": cv[:n].reshape(-1)}
    want = None
    if live.max() < PAGES:
        at = np.maximum(live, 0)
        keep = (live >= 0)[:, None, None, None]
        want = (np.where(keep, k[at], ck[:n]), np.where(keep, v[at], cv[:n]))
    shape = {"pages": PAGES, "live": n}
    return arrays, shape, {"count": n}, None, {"live_pages": live}, want


def read_table(table=TABLE, seqlens=(19, 4), seq=3 * P):
    rng = np.random.default_rng(16)
    table = np.asarray(table, np.int32)
    seqlens = np.asarray(seqlens, np.int32)
    k, v = _pools(rng)
    n = len(seqlens) * H * seq * D
    arrays = {"seqlens_k": seqlens, "page_table": table, "key_pages": k.reshape(-1)}
    arrays |= {"value_pages": v.reshape(-1), "key": poison(n, np.float32)}
    arrays["value"] = poison(n, np.float32)
    m = table.shape[1]
    shape = {"batch": len(seqlens), "seq": seq, "pages": PAGES, "maxPages": m}
    params = {"count": len(seqlens) * H * seq, "seq": seq, "maxPages": m}
    return arrays, shape, params, seqlens, {"page_table": table}, None


#: The inputs the session's host or the contract refuse: (id, mode, case, error, message, what
#: the kernel does where a host skips every check, on the interpreter: "skipped" (as -1, the
#: reference's result), OutOfBounds, RaceError, or None where the result has no meaning).
REFUSED = [
    ("slot below -1", "append slot_mapping", lambda: append_slots([5, -7, 20, 33, I32_MIN, 70]),
     SessionError, r"slot_mapping\[1\] = -7: expected -1 \(none\) or a slot from 0 to 95", "skipped"),
    ("slot past the pool", "append slot_mapping", lambda: append_slots([5, 96, 20, 33, 1, 70]),
     SessionError, r"slot_mapping\[1\] = 96: expected -1 \(none\) or a slot from 0 to 95", OutOfBounds),
    ("duplicate slots in one step", "append slot_mapping", lambda: append_slots([5, 40, 20, 40, 1, 70]),
     SessionError, r"slot_mapping: slot 40 is given to tokens \[1, 3\] in one step", RaceError),
    ("page-table entry below -1", "append page_table", lambda: append_table([[4, -2, -1], [3, -1, -1]]),
     SessionError, r"page_table\[1\] = -2: expected -1 \(none\) or a page from 0 to 5", "skipped"),
    ("page-table entry past the pool", "append page_table", lambda: append_table([[4, 6, -1], [3, -1, -1]]),
     SessionError, r"page_table\[1\] = 6: expected -1 \(none\) or a page from 0 to 5", OutOfBounds),
    ("a page shared by two sequences written by both", "append page_table",
     lambda: append_table([[4, 1, -1], [4, 1, -1]], (21, 21)),
     SessionError, r"page_table: page 1 is shared \(sequences \[0, 1\]' tables name it 2 times\) and sequence 0 writes it", RaceError),
    ("a shared page written by one sequence", "append page_table",
     lambda: append_table([[4, 1, -1], [4, 1, -1]], (21, 12)),
     SessionError, r"page 1 is shared .* and sequence 0 writes it: expected a page written by one sequence alone", None),
    ("copy: a destination that is another pair's source", "copy", lambda: copy_pairs([[0, 2], [2, 3]]),
     SessionError, r"page_pairs: page 2 is both a source and a destination in one pass", None),
    ("copy: two pairs onto one page", "copy", lambda: copy_pairs([[0, 2], [1, 2]]),
     SessionError, r"page_pairs: page 2 is the destination of 2 pairs: expected each destination once a pass", RaceError),
    ("copy: a page past the pool", "copy", lambda: copy_pairs([[0, 2], [1, 6]]),
     SessionError, r"page_pairs\[3\] = 6: expected -1 \(none\) or a page from 0 to 5", OutOfBounds),
    ("copy: a page below -1", "copy", lambda: copy_pairs([[0, 2], [-3, 4]]),
     SessionError, r"page_pairs\[2\] = -3: expected -1", "skipped"),
    ("compact: a page twice (not a permutation)", "compact", lambda: compact_live([3, 0, 3]),
     SessionError, r"live_pages: page 3 is listed 2 times: expected each live page once", None),
    ("compact: a page past the pool", "compact", lambda: compact_live([3, 9]),
     SessionError, r"live_pages\[1\] = 9: expected -1 \(none\) or a page from 0 to 5", OutOfBounds),
    ("compact: a page below -1", "compact", lambda: compact_live([3, -4, 1]),
     SessionError, r"live_pages\[1\] = -4: expected -1", "skipped"),
]  # fmt: skip

#: Refused by the contract (check_dispatch) whatever the session checks: (id, mode, case,
#: error, message).
CONTRACT = [
    ("page-table entry past the pool", "append page_table", lambda: append_table([[4, 6, -1], [3, -1, -1]]),
     BufferError, r"binding 'key_pages' \(array<vec4<f32>>\) holds 384 elements, but kernel \S+ touches 448"),
    ("slot past the pool", "append slot_mapping", lambda: append_slots([5, 96, 20, 33, 1, 70]),
     BufferError, r"binding 'key_pages' .* holds 384 elements, but kernel \S+ touches 448"),
    ("seqlens_k past the page table", "append page_table", lambda: append_table(seqlens=(48, 6)),
     ParamsError, r"requires seqlens_k.max \+ 1 <= maxPages \* page_size; got count=8, keySeq=2, maxPages=3"),
    ("copy: a page past the pool", "copy", lambda: copy_pairs([[0, 2], [1, 6]]),
     BufferError, r"binding 'key_pages' .* holds 384 elements, but kernel \S+ touches 448"),
    ("compact: a page past the pool", "compact", lambda: compact_live([3, 9]),
     BufferError, r"binding 'key_pages' .* holds 384 elements, but kernel \S+ touches 640"),
    ("read: a page-table entry past the pool", "read page_table", lambda: read_table([[4, 7, -1], [3, -1, -1]]),
     BufferError, r"binding 'key_pages' .* holds 384 elements, but kernel \S+ touches 512"),
    ("read: seq past the page table", "read page_table", lambda: read_table(seq=3 * P + 1),
     ParamsError, r"requires seq <= maxPages \* page_size; got count=196, maxPages=3, seq=49"),
]  # fmt: skip

#: Inputs with a defined result the host passes as they are: (id, mode, case).
TAKEN = [
    ("slot -1 (skipped)", "append slot_mapping", lambda: append_slots([5, -1, 20, 33, -1, 70])),
    ("page-table entry -1 (its tokens skipped)", "append page_table", lambda: append_table([[4, -1, -1], [3, -1, -1]])),
    ("seqlens_k below -1 (an empty sequence: nothing new)", "append page_table", lambda: append_table(seqlens=(I32_MIN, -5))),
    ("a right-padded first prompt (seqlens_k + 1 < keySeq)", "append page_table", lambda: append_table(seqlens=(0, 1), key_seq=5)),
    ("a page shared by two sequences, written by neither", "append page_table", lambda: append_table([[4, 1, -1], [4, 3, -1]], (21, 19))),
    ("copy: a pair with a -1 (skipped)", "copy", lambda: copy_pairs([[0, 2], [-1, 4], [3, -1]])),
    ("copy: chains split into passes", "copy", lambda: copy_pairs([[2, 3]])),
    ("compact: a hole (-1: that page of the new pools untouched)", "compact", lambda: compact_live([3, -1, 0, 5])),
]  # fmt: skip


@pytest.fixture(params=["interp", "gpu"])
def host(request):
    return host_class(request)()


def _session_checks(mode, arrays, seqlens):
    """What the paged session's host checks before it dispatches ``mode`` with ``arrays``."""
    key_seq = None
    if mode == "append page_table":
        key_seq = len(arrays["src_k"].reshape(len(seqlens), -1)[0]) // (H * D)
    check_pages(
        PAGES, P,
        slot_mapping=arrays.get("slot_mapping"),
        page_table=arrays.get("page_table"),
        seqlens_k=seqlens if mode == "append page_table" else None,
        key_seq=key_seq,
        page_pairs=arrays.get("page_pairs"),
        live_pages=arrays.get("live_pages"),
    )  # fmt: skip


def _outputs(mode):
    return ("compact_key", "compact_value") if mode == "compact" else ("key_pages", "value_pages")


def _run(host, mode, case, checked=True):
    arrays, shape, params, seqlens, inputs, want = case
    if checked:
        _session_checks(mode, arrays, seqlens)
    got = dispatch(host, PROGRAMS[mode], arrays, shape, params, seqlens, checked, inputs=inputs)
    return got, want


def _judge(mode, got, want):
    for name, w in zip(_outputs(mode), want):
        assert np.array_equal(
            got[name].view(np.uint32), np.asarray(w, np.float32).reshape(-1).view(np.uint32)
        ), f"{mode}: {name} is not the reference's (a canary page written, or a row missing)"


@pytest.mark.parametrize("row", TAKEN, ids=[r[0] for r in TAKEN])
def test_paged_inputs_taken(host, row):
    """Skipped as the kernel documents: the reference's pools, every other page untouched."""
    _, mode, make = row
    got, want = _run(host, mode, make())
    _judge(mode, got, want)


@pytest.mark.parametrize("row", REFUSED, ids=[r[0] for r in REFUSED])
def test_paged_inputs_refused_by_the_session_host(host, row):
    _, mode, make, error, message, _ = row
    with pytest.raises(error, match=message):
        _run(host, mode, make())


@pytest.mark.parametrize("row", CONTRACT, ids=[r[0] for r in CONTRACT])
def test_paged_inputs_refused_by_the_contract(host, row):
    """Without the session's checks, the contract's sizes still refuse an id past the pool and
    lengths past the table, before any dispatch."""
    _, mode, make, error, message = row
    arrays, shape, params, seqlens, inputs, _ = make()
    with pytest.raises(error, match=message):
        dispatch(host, PROGRAMS[mode], arrays, shape, params, seqlens, inputs=inputs, exact=True)


UNCHECKED = [r for r in REFUSED if r[5] is not None]


@pytest.mark.parametrize("row", UNCHECKED, ids=[r[0] for r in UNCHECKED])
def test_what_a_refused_input_does_without_the_checks(row):
    """On the interpreter, with every check skipped: an id below -1 is skipped as -1 (the
    reference's pools), an id past the pool is an access out of bounds, two writers of one
    row a race."""
    _, mode, make, _, _, result = row
    case = make()
    if result == "skipped":
        arrays, shape, params, seqlens, inputs, want = case
        got = dispatch(InterpHost(), PROGRAMS[mode], arrays, shape, params, seqlens, False)
        _judge(mode, got, want)
        return
    with pytest.raises(result):
        _run(InterpHost(), mode, case, checked=False)


def test_a_slot_past_the_pool_reaches_a_canary_on_the_gpu(gpu):
    """The canaries can fail: a host that skips every check and maps a token one slot past
    the pool makes the kernel write there, into the canary after the pool (the range binds
    it), and the check names it."""
    arrays, shape, params, seqlens, inputs, _ = append_slots([5, 96, 20, 33, 1, 70])
    with pytest.raises(AssertionError, match=r"the canary after 'key_pages' was written"):
        dispatch(GpuHost(), PROGRAMS["append slot_mapping"], arrays, shape, params, None, False)
