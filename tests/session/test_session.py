"""kvdsl.session: every format through one scenario on both hosts, the checks failing on planted
faults, the refusals, the GPU's per-step times, and the ``kvdsl session`` command."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from kvdsl import cli
from kvdsl.session import (
    FORMATS,
    GpuHost,
    InterpHost,
    Session,
    SessionError,
    SessionMismatch,
    Spec,
)
from tests.helpers.session import host_class


def _spec(fmt: str, **kw) -> Spec:
    head_dim = 32 if fmt in ("q8_0", "q4_0") else 8
    return Spec(**({"layers": 2, "batch": 3, "kv_heads": 2, "head_dim": head_dim, "capacity": 10, "format": fmt} | kw))  # fmt: skip


def _scenario(s: Session) -> None:
    s.prefill([3, 0, 7])
    for _ in range(4):
        s.decode()
    s.merge(2)
    if s.fmt.shifts:
        s.shift(3)
        s.shift(10)
    for _ in range(3):  # past the capacity: the window ends at it
        s.decode()
    s.merge(1)
    s.read()


@pytest.fixture(params=["interp", "gpu"])
def host(request):
    return host_class(request)


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_keeps_its_cache_over_a_session(host, fmt):
    s = Session(_spec(fmt), host(), seed=3)
    _scenario(s)
    assert s.checks == len(s.steps) == (13 if s.fmt.shifts else 11)
    assert s.lengths.tolist() == ([26, 23, 30] if s.fmt.shifts else [13, 10, 17])
    got = s.read()
    # The read-back rows are the cache's words, decoded (written rows: no poison left in them).
    # The session's checks held those words to the oracle's: on the interpreter exactly; on a
    # GPU a scale may sit an ulp or two from numpy's (NVIDIA's f32 division is not correctly
    # rounded) and a code a step.
    live = s.layers[0]
    words = s._live(s._cache(live, live.live)[0])
    if host is InterpHost:
        assert np.array_equal(words, live.model_k.reshape(words.shape), equal_nan=True)
    want_k = s.fmt.decode(words.reshape(-1, s.fmt.unit), 0).reshape(got[0][0].shape)
    if host is GpuHost and fmt == "ort_q4":  # a GPU's fma may round its norm 1 ulp apart
        np.testing.assert_allclose(got[0][0], want_k, rtol=2e-7, atol=0)
    elif host is GpuHost and fmt == "int4_asym":  # lo + q * scale may be one fma on a GPU
        np.testing.assert_allclose(got[0][0], want_k, rtol=2e-7, atol=1e-6)
    else:
        assert np.array_equal(got[0][0], want_k, equal_nan=True)
    assert not np.isnan(got[0][0][:, :, :7]).any()


def test_a_write_into_a_canary_is_found():
    s = Session(_spec("f32"), InterpHost())
    s.decode()
    layer = s.layers[1]
    s.host.write(layer.v[1 - layer.live], s.canary + s.cache_bytes + 4, b"\0\0\0\0")
    with pytest.raises(
        SessionMismatch,
        match=r"layer 1 value: byte \d+ of buffer layer1_v\d, a canary, was written",
    ):
        s.check()  # fmt: skip


def test_a_wrong_element_is_found():
    s = Session(_spec("int8"), InterpHost())
    s.prefill([2, 2, 2])
    layer = s.layers[0]
    s.host.write(layer.k[layer.live], s.canary + 8, np.array([12345], np.uint32))
    with pytest.raises(
        SessionMismatch,
        match=r"after step 0, prefill \(2 tokens\): layer 0 key: 1 values differ, first at 2: 12345 != \d+$",
    ):
        s.check()  # fmt: skip


def test_a_row_written_one_step_late_is_found(monkeypatch):
    """A format whose append lands one row late (seqlens_k one too many) fails the next check."""
    s = Session(_spec("f16"), InterpHost())
    s.prefill([2, 4, 1])
    real = type(s.fmt).append

    def late(self, w, cache, new):
        w.host.write(w.inputs["seqlens_k"].buffer, 0, np.asarray(w.lens + 1, np.int32))
        real(self, dataclasses.replace(w, lens=w.lens + 1), cache, new)

    monkeypatch.setattr(type(s.fmt), "append", late)
    with pytest.raises(SessionMismatch, match=r"after step 1, decode \(1 tokens\): layer 0 key"):
        s.decode()


SPEC_ERRORS = [
    ({"format": "bf16"}, r"format='bf16': expected one of f32, f16, int8, int4, int4_asym, q8_0, q4_0, ort_q4, template_int8, template_int4"),
    ({"format": "q8_0", "head_dim": 40}, r"head_dim=40: expected a multiple of 32 for format 'q8_0'"),
    ({"head_dim": 12}, r"head_dim=12: expected a multiple of 8"),
    ({"layers": 0}, r"layers=0: expected a whole number, 1 or more"),
    ({"batch": 2.0}, r"batch=2.0: expected a whole number, 1 or more"),
    ({"capacity": 0}, r"capacity=0: expected a whole number, 1 to 1073741824"),
]  # fmt: skip


@pytest.mark.parametrize("change,message", SPEC_ERRORS, ids=[m[:20] for _, m in SPEC_ERRORS])
def test_spec_refusals(change, message):
    with pytest.raises(SessionError, match=message):
        Spec(**({"format": "f32"} | change))


def test_operation_refusals():
    s = Session(_spec("int4"), InterpHost())
    with pytest.raises(
        SessionError, match=r"lengths=\[1, 2\]: expected one prompt length per sequence \(3\)"
    ):
        s.prefill([1, 2])  # fmt: skip
    with pytest.raises(SessionError, match=r"lengths\[2\]=11: expected a whole number, 0 to 10"):
        s.prefill([1, 2, 11])
    with pytest.raises(SessionError, match=r"lengths\[0\]=-1: expected a whole number, 0 to 10"):
        s.prefill([-1, 2, 3])
    with pytest.raises(SessionError, match=r"n=0: expected a whole number, 1 to 10"):
        s.merge(0)
    with pytest.raises(SessionError, match=r"shift: format='int4' has no sliding-window kernel"):
        s.shift(1)
    with pytest.raises(
        SessionError,
        match=r"capacity=200000: a layer's K cache is \d+ bytes, past one binding's 134217728",
    ):
        Session(Spec(1, 4, 8, 128, 200000, "f16"), InterpHost())  # fmt: skip
    assert s.steps == [] and s.checks == 0  # nothing ran


def test_gpu_steps_are_timed(gpu):
    s = Session(_spec("f32"), GpuHost(), check_every=False)
    s.prefill([1, 2, 3])
    for _ in range(5):
        s.decode()
    s.merge(2)
    s.check()
    s.gpu_times()
    if gpu["timestamp_query"]:
        assert all(st.gpu is not None and st.gpu > 0 for st in s.steps)
    assert all(st.host > 0 for st in s.steps)


def test_cli_runs_a_scenario(capsys, gpu, tmp_path):
    csv = tmp_path / "steps.csv"
    argv = ["session", "--scenario", "mixed", "--layers", "2", "--steps", "40", "--batch", "2",
            "--format", "f16", "--kv-heads", "2", "--head-dim", "16", "--prompt", "6",
            "--check-every", "5", "--csv", str(csv)]  # fmt: skip
    assert cli.main(argv) == 0
    out = capsys.readouterr()
    assert "session mixed: 2 layers x batch 2 x 2 kv heads x 326 rows x head dim 16, f16" in out.out
    assert "checked against the oracle 9 times, 0 mismatches" in out.out
    assert out.err == ""  # no progress bar where stderr is not a terminal
    rows = csv.read_text().splitlines()
    assert rows[0] == "step,op,tokens,gpu_us,host_us" and len(rows) == 42
    assert rows[1].startswith("0,prefill,")


def test_cli_on_the_interpreter(capsys):
    argv = ["session", "--backend", "interp", "--layers", "1", "--steps", "5", "--batch", "2",
            "--format", "q4_0", "--kv-heads", "1", "--head-dim", "32", "--prompt", "3"]  # fmt: skip
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "decode        5       5 |" in out
    assert "GPU not timed (the interpreter)" in out


CLI_ERRORS = [
    (["--format", "bf16"], "argument --format: invalid choice: 'bf16'"),
    (["--layers", "0"], "argument --layers: 0 is out of range: give 1 or more"),
    (["--steps", "-3"], "argument --steps: -3 is negative: give 0 or more"),
    (["--model", "gpt5"], "--model='gpt5': expected one of qwen25_05b, llama32_1b"),
    (["--head-dim", "12", "--format", "f32"], "head_dim=12: expected a multiple of 8"),
    (["--prompt", "50", "--capacity", "20"], "--prompt=50: expected at most the capacity (20 rows)"),
    (["--capacity", "300000"], "capacity=300000: a layer's K cache is"),
    (["--csv", "/no/such/dir/x.csv", "--steps", "1", "--layers", "1", "--kv-heads", "1", "--head-dim", "8", "--prompt", "2"], "--csv: cannot write '/no/such/dir/x.csv' (No such file or directory)"),
]  # fmt: skip


@pytest.mark.parametrize("args,message", CLI_ERRORS, ids=[a[0] for a, _ in CLI_ERRORS])
def test_cli_bad_options_are_one_line(capsys, gpu, args, message):
    with pytest.raises(SystemExit) if message.startswith("argument") else _none():
        code = cli.main(["session"] + args)
        assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert message in err[0] and len(err) <= 2
    assert "Traceback" not in "\n".join(err)


class _none:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
