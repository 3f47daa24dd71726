"""kvdsl.session.paged: sessions over paged caches on both hosts (every format, both layouts
and both addressings), fork with copy-on-write, compaction, windows and reads checked against
the oracle; the checks failing on planted faults; fork in the contiguous session; the
refusals."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl.session import (
    InterpHost,
    PagedSession,
    PagedSpec,
    Session,
    SessionError,
    SessionMismatch,
    Spec,
)
from tests.helpers.session import host_class

FORMATS = ("f32", "f16", "int8", "int4", "int4_asym", "q8_0", "q4_0", "ort_q4")


@pytest.fixture(params=["interp", "gpu"])
def host(request):
    return host_class(request)


def _spec(fmt: str, **kw) -> PagedSpec:
    head_dim = 32 if fmt in ("q8_0", "q4_0") else 8
    return PagedSpec(**({"layers": 2, "batch": 3, "kv_heads": 2, "head_dim": head_dim, "max_pages": 3, "format": fmt} | kw))  # fmt: skip


def _scenario(s: PagedSession) -> None:
    s.prefill([5, 17, 0])  # a partial page, a page and one token, an empty sequence
    s.decode()
    s.fork(1, 2)  # sequence 2 shares sequence 1's two pages
    s.decode()  # both write the shared partial page: one copy-on-write, the other alone
    s.extend(6)
    s.read()
    s.compact()
    s.window(8)  # the pages wholly before the last 8 tokens released (a shared one too)
    s.decode()
    s.read()
    s.fork(0, 1)
    s.compact()
    s.extend(3)


@pytest.mark.parametrize("addressing", ["page_table", "slot_mapping"])
@pytest.mark.parametrize("layout", ["nhd", "hnd"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_every_paged_format_keeps_its_cache_over_a_session(host, fmt, layout, addressing):
    s = PagedSession(_spec(fmt, layout=layout, addressing=addressing), host(), seed=5)
    _scenario(s)
    assert s.checks == len(s.steps) == 13
    assert s.lengths.tolist() == [17, 17, 29]
    assert s.copies == 2 and s.forks == 2 and s.compactions == 2
    got = s.read()
    # The rows read back are the tokens the oracle holds, at every position a sequence holds
    # and the window kept; NaN elsewhere.
    k = got[1][0]  # layer 1's K, [batch, heads, capacity, head_dim]
    assert not np.isnan(k[0, :, :17]).any() and np.isnan(k[0, :, 17:]).all()
    assert np.isnan(k[2, :, :16]).all() and not np.isnan(k[2, :, 16:29]).any()
    if s.rows.float or isinstance(s.host, InterpHost):  # (a GPU's code may move by a step)
        layer = s.layers[1]
        rows = s.rows.decode(layer.seq_k[0, :16], s.spec.head_dim)
        assert np.array_equal(k[0, :, :16], rows.transpose(1, 0, 2))


def test_fork_copies_a_shared_page_before_its_first_write():
    """Forked sequences share pages until one writes: its page is copied then (paged_copy),
    and the other keeps the original."""
    s = PagedSession(PagedSpec(batch=2, max_pages=2), seed=1)
    s.prefill([20, 0])
    s.fork(0, 1)
    assert (s.alloc.table[0] == s.alloc.table[1]).all() and s.alloc.refs[s.alloc.table[0, 1]] == 2
    shared = int(s.alloc.table[0, 1])
    s.decode()
    assert s.copies == 1
    assert s.alloc.table[0, 0] == s.alloc.table[1, 0]  # the full first page stays shared
    assert {int(s.alloc.table[0, 1]), int(s.alloc.table[1, 1])} >= {shared}
    assert s.alloc.table[0, 1] != s.alloc.table[1, 1] and s.alloc.refs[shared] == 1


def test_compaction_leaves_the_owned_pages_as_a_prefix():
    s = PagedSession(PagedSpec(batch=3, max_pages=3), seed=2)
    s.prefill([33, 0, 9])
    s.fork(0, 1)
    s.compact()
    owned = sorted(set(s.alloc.table[s.alloc.table >= 0].tolist()))
    assert owned == list(range(4))
    assert sorted(s.alloc.free) == list(range(4, s.pages))


def test_a_window_frees_the_pages_no_sequence_holds():
    s = PagedSession(PagedSpec(batch=2, max_pages=4), seed=3)
    s.prefill([40, 0])
    s.fork(0, 1)
    s.extend(8)  # 48 tokens each: three pages, the third written by both (a copy)
    free = len(s.alloc.free)
    s.window(16)  # every page wholly before position 32 released by both sequences
    assert (s.alloc.table[:, :2] == -1).all() and (s.alloc.table[:, 2] >= 0).all()
    assert len(s.alloc.free) == free + 2


def test_a_write_into_a_free_page_is_found():
    """A page no sequence owns keeps its contents: a stray row written there is found."""
    s = PagedSession(PagedSpec(batch=2), seed=4)
    s.prefill([3, 4])
    layer = s.layers[0]
    page = s.alloc.free[0]
    buf = layer.k[layer.live]
    at = s.canary + page * s.rows.page_values * 4
    s.host.write(buf, at, np.ones(4, np.float32))
    with pytest.raises(SessionMismatch, match=rf"layer 0 key \(live pool\): 4 values differ.*\(page {page}\)"):  # fmt: skip
        s.check()


def test_a_write_into_a_pool_canary_is_found():
    s = PagedSession(PagedSpec(batch=2), seed=4)
    s.prefill([3, 4])
    buf = s.layers[0].v[1]
    s.host.write(buf, buf.size - 4, np.ones(1, np.float32))
    with pytest.raises(SessionMismatch, match=r"layer 0 value: byte \d+ of buffer layer0_v1, a canary"):  # fmt: skip
        s.check()


def test_a_compaction_that_keeps_the_old_ids_is_found(monkeypatch):
    """A host that compacts the pools but forgets to rewrite its tables reads the wrong pages."""
    s = PagedSession(PagedSpec(batch=2, max_pages=2), seed=6)
    s.prefill([20, 9])
    table = s.alloc.table.copy()
    s.compact()
    s.alloc.table = table
    with pytest.raises(SessionMismatch, match=r"sequence \d position \d+ \(page \d+\) is not the row it was given"):  # fmt: skip
        s.check()


def test_paged_refusals():
    s = PagedSession(PagedSpec(batch=2, max_pages=2), seed=0)
    cases = [
        (lambda: s.prefill([33, 0]), r"lengths\[0\]=33: expected a whole number, 0 to 32"),
        (lambda: s.prefill([1]), r"expected one prompt length per sequence \(2\)"),
        (lambda: s.fork(1, 1), r"fork: src=1 and dst=1: expected two sequences"),
        (lambda: s.fork(0, 2), r"dst=2: expected a whole number, 0 to 1"),
        (lambda: s.window(0), r"w=0: expected a whole number, 1 to 2147483647"),
    ]
    for call, message in cases:
        with pytest.raises(SessionError, match=message):
            call()
    s.prefill([30, 0])
    with pytest.raises(SessionError, match=r"extend: sequence 0 would hold 33 tokens, past its page table's 2 pages of 16 \(32 tokens\): give n at most 2"):  # fmt: skip
        s.extend(3)
    for kw, message in [
        ({"page_size": 24}, r"page_size=24: expected a power of two from 16 to 256"),
        ({"layout": "bhsd"}, r"layout='bhsd': expected one of nhd, hnd"),
        ({"addressing": "table"}, r"addressing='table': expected one of slot_mapping, page_table"),
        ({"format": "bf16"}, r"format='bf16': expected one of f32, f16, int8"),
        ({"pages": 5}, r"pages=5: expected a whole number, 10 to 16777216"),
    ]:
        with pytest.raises(SessionError, match=message):
            PagedSpec(batch=2, max_pages=4, **kw)


def test_a_full_pool_is_refused_before_any_dispatch():
    s = PagedSession(PagedSpec(batch=2, max_pages=2, pages=6), seed=0)
    s.alloc.free = s.alloc.free[:3]  # a host whose pool other users hold
    with pytest.raises(SessionError, match=r"pages=6: no free page left \(the last 2 stay free\)"):
        s.prefill([32, 0])


# ---- fork in the contiguous session ---------------------------------------------------------


@pytest.mark.parametrize("fmt", ["f32", "f16", "int8", "template_int4"])
def test_a_contiguous_fork_copies_the_rows(host, fmt):
    spec = Spec(layers=2, batch=3, kv_heads=2, head_dim=8, capacity=32, format=fmt)
    s = Session(spec, host(), seed=2)
    s.prefill([3, 9, 0])
    s.fork(1, 2)
    assert s.lengths.tolist() == [3, 9, 9] and s.forks == 1
    s.decode()
    s.merge(2)
    s.fork(2, 0)
    s.read()
    live = s.layers[1]
    assert np.array_equal(live.model_k[0].view(np.uint8), live.model_k[2].view(np.uint8))
    assert s.checks == len(s.steps) == 6


def test_a_contiguous_fork_without_its_copy_is_found(monkeypatch):
    from kvdsl.session.formats import FloatFormat

    monkeypatch.setattr(FloatFormat, "copy", lambda *a: None)
    s = Session(Spec(batch=2, kv_heads=2, head_dim=8, capacity=32), seed=1)
    s.prefill([4, 2])
    with pytest.raises(SessionMismatch, match=r"after step 1, fork"):
        s.fork(0, 1)


def test_a_contiguous_fork_of_unaligned_rows_is_refused():
    s = Session(Spec(batch=2, kv_heads=1, head_dim=8, capacity=5), seed=1)
    with pytest.raises(SessionError, match=r"fork: a sequence's rows are 160 bytes .* not a multiple of 256"):  # fmt: skip
        s.fork(0, 1)


# ---- kvdsl session --layout paged -------------------------------------------------------------


def test_cli_runs_a_paged_scenario(capsys, gpu, tmp_path):
    from kvdsl import cli

    csv = tmp_path / "steps.csv"
    argv = ["session", "--layout", "paged", "--page-size", "16", "--scenario", "mixed",
            "--layers", "2", "--steps", "40", "--batch", "3", "--format", "f16", "--kv-heads",
            "2", "--head-dim", "16", "--prompt", "6", "--check-every", "5", "--csv", str(csv),
            "--page-layout", "hnd"]  # fmt: skip
    assert cli.main(argv) == 0
    out = capsys.readouterr()
    assert (
        "session mixed: 2 layers x batch 3 x 2 kv heads x head dim 16, paged: 65 pages of 16 "
        "tokens (hnd, page_table, 21 per sequence), f16" in out.out
    )
    assert "checked against the oracle 9 times, 0 mismatches" in out.out
    for op in ("prefill", "decode", "fork", "compact", "window", "read"):
        assert f"\n{op:<8} " in out.out, op
    rows = csv.read_text().splitlines()
    assert len(rows) == 42 and rows[1].startswith("0,prefill,")


def test_cli_paged_decode_on_the_interpreter(capsys):
    from kvdsl import cli

    argv = ["session", "--layout", "paged", "--addressing", "slot_mapping", "--backend",
            "interp", "--layers", "1", "--steps", "20", "--batch", "2", "--format", "int8",
            "--kv-heads", "1", "--head-dim", "32", "--prompt", "14"]  # fmt: skip
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "(nhd, slot_mapping, 3 per sequence), int8" in out
    assert "decode       20      20 |" in out


@pytest.mark.parametrize(
    "args,message",
    [
        (["--page-size", "24"], "page_size=24: expected a power of two from 16 to 256"),
        (["--format", "template_int8"], "format='template_int8': expected one of f32, f16, int8"),
        (["--page-layout", "bhsd"], "argument --page-layout: invalid choice: 'bhsd'"),
    ],
)
def test_cli_bad_paged_options_are_one_line(capsys, args, message):
    from kvdsl import cli

    argv = ["session", "--layout", "paged", "--backend", "interp", "--steps", "1"] + args
    if message.startswith("argument"):
        with pytest.raises(SystemExit):
            cli.main(argv)
    else:
        assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert message in err[0] and len(err) <= 2 and "Traceback" not in "\n".join(err)
