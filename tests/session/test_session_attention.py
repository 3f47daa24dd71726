"""kvdsl.session.attention: attention after every decode of a session, contiguous and paged, in
every format ``attend`` reads (the template's int8 and int4 with the session's ``kv_scale``), on
both hosts: long sessions (a thousand decodes on the interpreter; the GPU's count scales with
``KVDSL_SESSION_STEPS`` as the fuzz's does), planted faults found and named as the attend
step's, the refusals, and ``kvdsl session --attention``.
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from kvdsl import cli
from kvdsl.session import (
    GpuHost,
    InterpHost,
    PagedSession,
    PagedSpec,
    Session,
    SessionError,
    SessionMismatch,
    Spec,
)
from kvdsl.session import attention as attention_module

#: The fuzz's budget of interpreter steps (tests/session/test_session_fuzz.py): the GPU's long
#: sessions decode a fiftieth of it (200 in CI; KVDSL_SESSION_STEPS=50000 and up: 1,000 and
#: more), the interpreter's at least 1,000.
STEPS = int(os.environ.get("KVDSL_SESSION_STEPS", "10000"))
LONG = {"interp": max(1000, STEPS // 10), "gpu": STEPS // 50}
PAGED = ("f32", "f16", "int8", "int4", "int4_asym", "q8_0", "q4_0", "ort_q4")
#: The template's caches: contiguous only (a paged session refuses them).
TEMPLATE = ("template_int8", "template_int4")
CONTIGUOUS = PAGED + TEMPLATE


@pytest.fixture(params=["interp", "gpu"])
def host(request):
    if request.param == "gpu":
        request.getfixturevalue("gpu")
    return request.param


def _host(kind: str):
    return GpuHost() if kind == "gpu" else InterpHost()


def _dim(fmt: str) -> int:
    return 32 if fmt in ("q8_0", "q4_0") else 8


def _attends(s) -> int:
    return sum(st.op == "attend" for st in s.steps)


def _long_contiguous(s: Session, decodes: int, rng: np.random.Generator) -> None:
    """Prompts, then ``decodes`` decodes with a fork, a merge, a shift (float formats), a read
    or a fresh prompt every 40 or so: past the capacity too, where the last row is rewritten."""
    cap = s.spec.capacity
    s.prefill(rng.integers(1, cap + 1, s.spec.batch))
    for i in range(1, decodes + 1):
        s.decode()
        if i % 41 == 0:
            op = ("fork", "merge", "shift", "read", "prefill")[(i // 41) % 5]
            if op == "fork":
                s.fork(*(int(x) for x in rng.choice(s.spec.batch, 2, replace=False)))
            elif op == "merge":
                s.merge(int(rng.integers(1, 4)))
            elif op == "shift" and s.fmt.shifts:
                s.shift(int(rng.integers(1, 4)))
            elif op == "read":
                s.read()
            else:
                s.prefill(rng.integers(0, cap + 1, s.spec.batch))


def _long_paged(s: PagedSession, decodes: int, rng: np.random.Generator) -> None:
    """Prompts, then ``decodes`` decodes with a fork, a compaction or a window every 17 or so,
    and fresh prompts whenever a sequence fills its page table."""
    cap = s.spec.capacity
    s.prefill(rng.integers(1, cap // 2, s.spec.batch))
    for i in range(1, decodes + 1):
        if s.lengths.max() == cap:
            s.prefill(rng.integers(0, cap // 2, s.spec.batch))
        s.decode()
        if i % 17 == 0:
            op = ("fork", "compact", "window")[(i // 17) % 3]
            if op == "fork":
                s.fork(*(int(x) for x in rng.choice(s.spec.batch, 2, replace=False)))
            elif op == "compact":
                s.compact()
            else:
                s.window(int(rng.integers(s.spec.page_size, cap + 1)))


@pytest.mark.parametrize("paged", [False, True], ids=["contiguous", "paged"])
def test_long_sessions_attend_after_every_decode(host, paged):
    """GQA (2 query heads a KV head) over a small cache: every decode's attention (split over
    chunks and merged once a sequence passes a workgroup's keys) matches float64 attention
    over the oracle's rows; the interpreter's contiguous session decodes 1,000 times."""
    rng = np.random.default_rng(5)
    decodes = LONG[host] if not paged or host == "gpu" else LONG[host] // 5
    if paged:
        spec = PagedSpec(1, 3, 1, 8, 16, 2, 0, "hnd", "page_table", "f32")
        s = PagedSession(spec, _host(host), seed=5, q_heads=2)
        _long_paged(s, decodes, rng)
    else:
        s = Session(Spec(1, 2, 1, 8, 16, "f32"), _host(host), seed=5, q_heads=2)
        _long_contiguous(s, decodes, rng)
    assert _attends(s) == decodes == s.attention.runs
    assert s.checks == len(s.steps)  # the cache checked after each attend step too
    assert s.attention.merges > 0  # some steps split the keys


@pytest.mark.parametrize(
    "fmt, paged",
    [(f, False) for f in TEMPLATE] + [("ort_q4", False), ("ort_q4", True)],
    ids=[*TEMPLATE, "ort_q4-contiguous", "ort_q4-paged"],
)
def test_long_gpu_sessions_of_the_foreign_formats(gpu, fmt, paged):
    """The template's int8 and int4 (``attend`` reading them with the session's own
    ``kv_scale`` pair) and ONNX Runtime's 4-bit format, contiguous and paged, over a small cache
    on the GPU: every decode's attention matches float64 attention over the oracle's rows
    (1,000 decodes and more from KVDSL_SESSION_STEPS=50000; the interpreter's sessions are the
    format test's and the fuzz's)."""
    rng = np.random.default_rng(7)
    if paged:
        spec = PagedSpec(1, 2, 1, 8, 16, 3, 0, "nhd", "page_table", fmt)
        s = PagedSession(spec, GpuHost(), seed=7, q_heads=2)
        _long_paged(s, LONG["gpu"], rng)
    else:
        # ORT's rows are 8 bytes here: 32 of them make a sequence 256, where a fork's copy starts.
        cap = 32 if fmt == "ort_q4" else 16
        s = Session(Spec(1, 2, 1, 8, cap, fmt), GpuHost(), seed=7, q_heads=2)
        _long_contiguous(s, LONG["gpu"], rng)
    assert _attends(s) == LONG["gpu"] == s.attention.runs
    assert s.checks == len(s.steps)  # the cache checked after each attend step too
    assert s.attention.merges > 0


@pytest.mark.parametrize("fmt", CONTIGUOUS)
def test_every_contiguous_format_attends(host, fmt):
    s = Session(Spec(1, 2, 2, _dim(fmt), 16, fmt), _host(host), seed=2, q_heads=4)
    _long_contiguous(s, 10, np.random.default_rng(2))
    assert _attends(s) == 10 and s.attention.merges > 0


@pytest.mark.parametrize("fmt", PAGED)
def test_every_paged_format_attends(host, fmt):
    """Each format in one layout and addressing (the two alternate over the formats), the
    sequences reaching a third page."""
    i = PAGED.index(fmt)
    layout, addressing = ("nhd", "hnd")[i % 2], ("page_table", "slot_mapping")[i // 2 % 2]
    spec = PagedSpec(1, 2, 2, _dim(fmt), 16, 3, 0, layout, addressing, fmt)
    s = PagedSession(spec, _host(host), seed=2, q_heads=2)
    s.prefill([30, 17])
    for _ in range(3):
        s.decode()
    s.fork(0, 1)
    s.decode()
    s.compact()
    s.decode()
    assert _attends(s) == 5 and s.attention.merges == 5


def test_a_fork_attends_over_its_own_pages(monkeypatch):
    """After a fork the two sequences share pages until a decode copies the last one: each
    attends over its own table, and a host that gives the kernel the source's table for the
    forked sequence (the rows it wrote since unread) is found."""
    spec = PagedSpec(1, 2, 1, 8, 16, 2, 0, "nhd", "page_table", "f32")
    s = PagedSession(spec, InterpHost(), seed=1, q_heads=2)
    s.prefill([20, 3])
    s.fork(0, 1)
    s.decode()  # both write position 20: sequence 1 copies the shared page first
    assert s.alloc.table[0, 1] != s.alloc.table[1, 1] and s.alloc.table[0, 0] == s.alloc.table[1, 0]
    real = PagedSession._attend_inputs

    def shared(self, oracle):
        out = real(self, oracle)
        table = self.alloc.table.copy()
        table[1] = table[0]
        self._input("page_table", table)  # the kernel's table; the session keeps its own
        return out

    monkeypatch.setattr(PagedSession, "_attend_inputs", shared)
    with pytest.raises(SessionMismatch, match=r"^after step 5, attend: layer 0 output"):
        s.decode()


def test_an_attention_over_one_token_fewer_is_found(monkeypatch):
    """A host that tells ``attend`` one row fewer than each sequence holds (its newest key
    unread) fails the step, named as the attend step's, layer by layer."""
    real = InterpHost.write

    def short(self, buf, offset, data):
        if buf.label == "attend_seqlens_k":
            data = np.maximum(np.asarray(data) - 1, 0).astype(np.int32)
        real(self, buf, offset, data)

    s = Session(Spec(2, 2, 1, 8, 16, "f32"), InterpHost(), q_heads=2)
    s.prefill([4, 6])
    monkeypatch.setattr(InterpHost, "write", short)
    with pytest.raises(SessionMismatch, match=r"^after step 2, attend: layer 0 output \(over \[5, 7\] rows\): \d+ elements differ"):  # fmt: skip
        s.decode()


def test_an_oracle_mask_off_by_one_is_found(monkeypatch):
    """The oracle's mask one key short (the new token's own key unseen) is found on the paged
    session's first attend step, whichever chunks the keys took."""
    real = attention_module.reference

    def short(q, k, v, lengths, **kw):
        return real(q, k, v, np.maximum(np.asarray(lengths) - 1, 1), **kw)

    monkeypatch.setattr(attention_module, "reference", short)
    spec = PagedSpec(1, 2, 1, 8, 16, 3, 0, "nhd", "page_table", "f32")
    s = PagedSession(spec, InterpHost(), q_heads=2)
    s.prefill([30, 2])
    with pytest.raises(SessionMismatch, match=r"^after step 2, attend: layer 0 output \(over \[31, 3\] rows, \d+ chunks merged\)"):  # fmt: skip
        s.decode()


@pytest.mark.parametrize("fmt", TEMPLATE)
def test_a_template_scale_not_the_sessions_is_found(monkeypatch, fmt):
    """``attend`` given K's and V's scales the other way round (the cache written with the
    session's pair) fails the first attend step: the output is checked against rows decoded
    with the scales the session wrote them with."""
    from kvdsl.session.formats import TemplateQuant

    real = TemplateQuant.attend_inputs

    def swapped(self):
        constants, params = real(self)
        return {"kv_scale": constants["kv_scale"][::-1].copy()}, params

    monkeypatch.setattr(TemplateQuant, "attend_inputs", swapped)
    s = Session(Spec(1, 2, 2, 8, 16, fmt), InterpHost(), seed=3, q_heads=4)
    s.prefill([5, 9])
    with pytest.raises(SessionMismatch, match=r"^after step 2, attend: layer 0 output \(over \[6, 10\] rows"):  # fmt: skip
        s.decode()


@pytest.mark.parametrize("paged", [False, True], ids=["contiguous", "paged"])
def test_an_attend_steps_host_time_is_its_dispatch_alone(monkeypatch, gpu, paged):
    """The oracle's part of an attend step (the rows decoded, the float64 reference, the
    comparison) is not in the step's host time, as no other step's check is: with the reference
    made to take 0.3 s a layer, each attend step still records less, and still checks."""
    real = attention_module.reference
    calls = []

    def slow(*args, **kw):
        calls.append(1)
        time.sleep(0.3)
        return real(*args, **kw)

    monkeypatch.setattr(attention_module, "reference", slow)
    if paged:
        spec = PagedSpec(1, 2, 2, 8, 16, 3, 0, "nhd", "page_table", "int8")
        s = PagedSession(spec, GpuHost(), seed=3, q_heads=2)
    else:
        s = Session(Spec(1, 2, 2, 8, 16, "int8"), GpuHost(), seed=3, q_heads=2)
    s.prefill([7, 5])
    for _ in range(3):
        s.decode()
    attend = [st.host for st in s.steps if st.op == "attend"]
    assert len(attend) == 3 and len(calls) == 3
    assert max(attend) < 0.3, attend


@pytest.mark.parametrize("paged", [False, True], ids=["contiguous", "paged"])
def test_attention_checked_every_nth_step(monkeypatch, paged):
    """With ``attention_every=3`` every attend step runs but only every third is checked: the
    oracle's rows are decoded and the reference computed on those alone, and a fault on an
    unchecked step's output goes unseen until the next checked one, which names itself."""
    real = attention_module.reference
    calls = []

    def counted(*args, **kw):
        calls.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(attention_module, "reference", counted)
    if paged:
        spec = PagedSpec(2, 2, 1, 8, 16, 3, 0, "nhd", "page_table", "int4")
        s = PagedSession(spec, InterpHost(), seed=5, q_heads=2, attention_every=3)
    else:
        s = Session(Spec(2, 2, 1, 8, 16, "int4"), InterpHost(), seed=5, q_heads=2, attention_every=3)  # fmt: skip
    s.prefill([4, 6])
    for _ in range(7):
        s.decode()
    assert _attends(s) == 7 and s.attention.runs == 7 and s.attention.checked == 2
    assert len(calls) == 2 * 2  # two checked steps, two layers each
    short = InterpHost.write

    def fewer(self, buf, offset, data):
        if buf.label == "attend_seqlens_k":
            data = np.maximum(np.asarray(data) - 1, 0).astype(np.int32)
        short(self, buf, offset, data)

    monkeypatch.setattr(InterpHost, "write", fewer)
    s.decode()  # the eighth attend: not checked
    with pytest.raises(SessionMismatch, match=r"^after step 18, attend: layer 0 output"):
        s.decode()  # the ninth: checked


def test_attention_is_off_unless_asked_and_draws_apart():
    """Without ``q_heads`` a decode is one step; with it, the tokens drawn are the same (the
    queries have their own generator), so the caches are too."""
    spec = Spec(1, 2, 1, 8, 16, "f32")
    off, on = Session(spec, InterpHost(), seed=4), Session(spec, InterpHost(), seed=4, q_heads=1)
    for s in (off, on):
        s.prefill([2, 3])
        s.decode()
    assert [st.op for st in off.steps] == ["prefill", "decode"]
    assert [st.op for st in on.steps] == ["prefill", "decode", "attend"]
    assert off.layers[0].model_k.tobytes() == on.layers[0].model_k.tobytes()


REFUSALS = [
    (lambda: Session(Spec(1, 2, 2, 8, 16, "f32"), q_heads=3), r"^q_heads=3: expected a whole multiple of kv_heads \(2\)$"),
    (lambda: Session(Spec(1, 2, 1, 512, 16, "f32"), q_heads=1), r"^attention: format='f32' \(contiguous\) has no attend kernel a session can run: head_dim=512"),
    (lambda: PagedSession(PagedSpec(1, 2, 2, 8, 16, 2), q_heads=-2), r"^q_heads=-2: expected a whole multiple of kv_heads \(2\)$"),
]  # fmt: skip


@pytest.mark.parametrize("make,message", REFUSALS, ids=["heads", "dim", "paged"])
def test_refusals(make, message):
    with pytest.raises(SessionError, match=message) as err:
        make()
    assert "\n" not in str(err.value)


def test_cli_attention(capsys, gpu):
    argv = ["session", "--attention", "--layers", "2", "--steps", "30", "--batch", "2",
            "--format", "int8", "--kv-heads", "2", "--q-heads", "4", "--head-dim", "16",
            "--prompt", "12"]  # fmt: skip
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "attention: 4 query heads" in out
    assert "attend       30      30 |" in out
    assert "attention checked after 30 of 30 decodes, 0 mismatches" in out


def test_cli_attention_checked_every_nth_step(capsys):
    argv = ["session", "--attention", "--check-attention", "4", "--backend", "interp",
            "--layers", "1", "--steps", "10", "--batch", "2", "--format", "q8_0",
            "--kv-heads", "1", "--head-dim", "32", "--prompt", "6"]  # fmt: skip
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "over the oracle's rows every 4 steps" in out
    assert "attend       10      10 |" in out
    assert "attention checked after 2 of 10 decodes, 0 mismatches" in out


@pytest.mark.parametrize("flag", [["--check-attention", "2"], ["--q-heads", "4"]])
def test_cli_attention_options_need_attention(capsys, flag):
    argv = ["session", "--backend", "interp", "--layers", "1", "--steps", "2", *flag]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert f"{flag[0]}={flag[1]}: an option of the attention steps; give --attention too" in err


def test_cli_attention_paged_on_the_interpreter(capsys):
    argv = ["session", "--attention", "--backend", "interp", "--layout", "paged",
            "--scenario", "mixed", "--layers", "1", "--steps", "12", "--batch", "2",
            "--format", "f16", "--kv-heads", "1", "--head-dim", "8", "--prompt", "20"]  # fmt: skip
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "0 mismatches" in out and "attend " in out


def test_cli_attention_over_the_template_on_the_interpreter(capsys):
    argv = ["session", "--attention", "--backend", "interp", "--format", "template_int4",
            "--layers", "2", "--steps", "12", "--batch", "2", "--kv-heads", "1",
            "--head-dim", "8", "--prompt", "10"]  # fmt: skip
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "attend       12      12 |" in out
    assert "attention checked after 12 of 12 decodes, 0 mismatches" in out
