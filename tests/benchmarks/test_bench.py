"""The GPU benchmark's smoke run (``--small`` on llvmpipe): CSV columns, bytes, legacy rows."""

from __future__ import annotations

import csv
import dataclasses
import json
import sys

import numpy as np
import pytest

from kvdsl import catalog
from kvdsl.cli.inputs import UsageError
from tests.helpers.paths import BENCHMARKS, benchmark

bench = benchmark("gpu")
roofline = benchmark("roofline")

VARIANTS = ["copy_llama31_8b", "merge_f32_to_f16_llama31_8b", "merge_share_append_llama31_8b"]
S, P, H, D = bench.SMALL["cache"], bench.SMALL["prefill"], bench.HEADS, bench.HEAD_DIM


@pytest.fixture(scope="module")
def rows(tmp_path_factory, gpu) -> list[dict[str, str]]:
    out = tmp_path_factory.mktemp("bench")
    argv = ["--small", "--out", str(out), "--repeats", "2", "--warmup", "1"]
    assert bench.main(argv + ["--variants", *VARIANTS]) == 0
    with open(out / "gpu.csv", newline="") as f:
        reader = csv.DictReader(f)
        assert tuple(reader.fieldnames) == bench.COLUMNS
        data = list(reader)
    assert (out / "device.json").is_file()
    return data


def _row(rows, variant, batch, tokens):
    (row,) = [
        r
        for r in rows
        if r["variant"] == variant and int(r["batch"]) == batch and int(r["tokens"]) == tokens
    ]
    return row


def test_every_size_of_every_variant_is_timed(rows):
    # copy: 1 size per batch; merge and merge_share: prefill and decode per batch.
    assert len(rows) == 2 * (1 + 2 + 2)
    for r in rows:
        assert r["kvdsl_status"] == "ok"
        assert float(r["kvdsl_us"]) > 0 and float(r["roofline_us"]) > 0
        assert float(r["floor_us"]) > 0
        gbps = int(r["bytes"]) / float(r["kvdsl_us"]) / 1e3
        assert float(r["kvdsl_gbps"]) == pytest.approx(gbps, rel=1e-4)
        assert float(r["pct_roofline"]) == pytest.approx(
            100 * float(r["roofline_us"]) / float(r["kvdsl_us"]), rel=1e-4
        )


def test_bytes_follow_the_counting_rule(rows):
    # copy: K and V read and written, f32.
    assert int(_row(rows, "copy_llama31_8b", 2, S)["bytes"]) == 4 * 2 * H * S * D * 4
    # merge f32 -> f16: past (S - P rows) f16 in, new (P rows) f32 in, S rows f16 out.
    past, new, out = 2 * (S - P) * H * D * 2, 2 * P * H * D * 4, 2 * S * H * D * 2
    assert int(_row(rows, "merge_f32_to_f16_llama31_8b", 1, P)["bytes"]) == past + new + out
    # merge_share append, 1 token, batch 2: the new rows in and out, and seqlens_k.
    assert int(_row(rows, "merge_share_append_llama31_8b", 2, 1)["bytes"]) == (
        2 * (2 * H * D * 4) * 2 + 2 * 4
    )


def test_template_columns(rows, legacy_template):
    copy = _row(rows, "copy_llama31_8b", 1, S)
    assert copy["template_status"] == "ok" and float(copy["template_us"]) > 0
    ratio = float(copy["template_us"]) / float(copy["kvdsl_us"])
    assert float(copy["template_over_kvdsl"]) == pytest.approx(ratio, rel=1e-4)
    # kvdsl converts the f32 new K/V; the template has no such interface.
    converted = _row(rows, "merge_f32_to_f16_llama31_8b", 1, P)
    assert converted["template_status"].startswith("n/a") and converted["template_us"] == ""


def test_decode_rows_carry_the_floor_ratio(rows):
    decode = _row(rows, "merge_share_append_llama31_8b", 1, 1)
    assert decode["decode"] == "1"
    assert float(decode["floor_x"]) == pytest.approx(
        float(decode["kvdsl_us"]) / float(decode["floor_us"]), rel=1e-4
    )
    # The empty dispatch timed beside the row, alternately with it: the same-state ratio.
    assert float(decode["floor_beside_us"]) > 0
    assert float(decode["floor_beside_x"]) == pytest.approx(
        float(decode["kvdsl_us"]) / float(decode["floor_beside_us"]), rel=1e-4
    )
    # A 1-token merge still copies the whole cache: not a decode-size append.
    merge = _row(rows, "merge_f32_to_f16_llama31_8b", 1, 1)
    assert merge["floor_x"] == merge["floor_beside_us"] == merge["floor_beside_x"] == ""


def test_the_floor_is_timed_beside_each_decode_trial(tmp_path, monkeypatch, gpu, legacy_template):
    """A decode row's trials time the kernel, the copy and the empty dispatch in turn, and the
    row keeps the fastest empty dispatch; a prefill row times none."""
    from kvdsl import runtime

    name = "merge_share_append_llama31_8b"
    timed: list[tuple[str, float]] = []
    real = runtime.time_kernel

    def recording(kernel, *args, **kw):
        times = real(kernel, *args, **kw)
        timed.append((getattr(kernel, "name", None), float(np.median(times)) * 1e6))
        return times

    monkeypatch.setattr(runtime, "time_kernel", recording)
    argv = ["--small", "--repeats", "2", "--warmup", "1", "--batches", "1"]
    argv += ["--variants", name, "--out", str(tmp_path), "--retry-slow", "0"]
    assert bench.main(argv) == 0
    empty, copy = roofline.empty_kernel().name, roofline.copy_kernel().name
    # The floor, the reference copy, then per row two trials, prefill (kernel, copy) and
    # decode (kernel, copy, empty dispatch), each row's followed by the template's (no name).
    names = [n for n, _ in timed]
    assert names[:2] == [empty, copy]
    template = [None] * 2
    assert names[2:] == [name, copy] * 2 + template + [name, copy, empty] * 2 + template
    with open(tmp_path / "gpu.csv", newline="") as f:
        rows = {r["tokens"]: r for r in csv.DictReader(f)}
    assert rows[str(P)]["floor_beside_us"] == ""
    beside = [us for n, us in timed[2:] if n == empty]
    assert float(rows["1"]["floor_beside_us"]) == pytest.approx(min(beside), rel=5e-6)


PAGED = [
    "paged_append_page_table_p16_nhd_llama31_8b",
    "paged_append_int8_side_page_table_p16_nhd_llama31_8b",
]


def test_paged_appends_are_timed_beside_the_contiguous_append(tmp_path, gpu):
    """``--variants paged_append``'s rows carry the contiguous append of the same format timed
    beside them (merge_share's append for f32, dense_append for int8), and the bytes a paged
    append must move: new rows in, page rows out, seqlens_k and the page-table entries read."""
    argv = ["--small", "--out", str(tmp_path), "--repeats", "2", "--warmup", "1"]
    assert bench.main(argv + ["--variants", *PAGED]) == 0
    with open(tmp_path / "gpu.csv", newline="") as f:
        data = list(csv.DictReader(f))
    assert len(data) == 2 * 2 * 2  # two variants, two batches, prefill and decode
    for r in data:
        k, c = float(r["kvdsl_us"]), float(r["contiguous_us"])
        assert k > 0 and c > 0
        assert float(r["kvdsl_over_contiguous"]) == pytest.approx(k / c, rel=1e-4)
        want = "merge_share append" if "int8" not in r["variant"] else "dense_append"
        assert r["contiguous"].startswith(want), r["contiguous"]
        assert int(r["decode"]) == (int(r["tokens"]) == 1)
    # f32, batch 1, prefill: positions S-P .. S-1 lie in one page of 16: one table entry.
    row = _row(data, PAGED[0], 1, P)
    assert int(row["bytes"]) == 2 * (2 * P * H * D * 4) + 4 + 4


def test_representatives_cover_every_mode_at_the_issue_shape():
    reps = bench.representatives()
    assert {c.mode for c in reps.values()} == set(catalog.MODES)
    for name, cfg in reps.items():
        if cfg.mode in (
            "qkv",
            "paged_qkv",
            "attend",
            "attend_merge",
        ):  # its own model's shape: its query heads are the model's
            assert cfg == catalog.config(name), name
            continue
        assert getattr(cfg, "kv_heads", H) == H, name
        words = D // 2 if cfg.mode == "copy" and cfg.present_type == "u32" else D
        assert getattr(cfg, "head_dim", D) == words, name  # paged_window: no head shape
    assert len({(c.mode, bench.options(c)) for c in reps.values()}) == len(reps)


def test_a_tuned_variant_is_the_catalogs_with_its_schedule_replaced():
    name = "dense_append_q8_0_llama31_8b"
    spec = f"{name}@walk=staged,workgroup_size=128"
    reps = bench.representatives([spec])
    want = dataclasses.replace(catalog.config(name), walk="staged", workgroup_size=128)
    assert reps == {spec: want}
    for bad, words in [
        (f"{name}@format=int8", "'format=int8' is not FIELD=VALUE with FIELD one of"),
        (f"{name}@walk=strided", "walk='strided': expected 'runs' or 'staged' for q8_0"),
        (f"{name}@workgroup_size=", "'workgroup_size=' is not FIELD=VALUE"),
    ]:
        with pytest.raises(UsageError) as err:
            bench.representatives([bad])
        assert words in str(err.value), bad


def test_budget_stops_between_configs_and_names_the_rest(tmp_path, gpu):
    argv = ["--small", "--out", str(tmp_path), "--repeats", "2", "--warmup", "1"]
    assert bench.main(argv + ["--budget", "0", "--variants", *VARIANTS]) == 0
    with open(tmp_path / "gpu.csv", newline="") as f:
        assert list(csv.DictReader(f)) == []
    info = json.loads((tmp_path / "device.json").read_text())
    assert info["unmeasured"] == VARIANTS and info["floor_us"] > 0


def test_a_run_killed_inside_a_config_keeps_the_rows_it_logged(tmp_path, monkeypatch, gpu):
    """The device session ending inside a config (the rotated fused QKV kernel, the last of
    the rotation run): the CSV holds every row the log showed, not only the configs done."""
    logged = []
    real = bench.progress

    def progress(done, total, row, elapsed):
        if done == 2:
            raise KeyboardInterrupt  # the session ends while the config's second row is timed
        logged.append(row["variant"])
        return real(done, total, row, elapsed)

    monkeypatch.setattr(bench, "progress", progress)
    argv = ["--small", "--out", str(tmp_path), "--repeats", "2", "--warmup", "1", "--trials", "1"]
    with pytest.raises(KeyboardInterrupt):
        bench.main(argv + ["--variants", "qkv_int4_rotation128_llama31_8b"])
    with open(tmp_path / "gpu.csv", newline="") as f:
        data = list(csv.DictReader(f))
    assert logged == [r["variant"] for r in data][:1] == ["qkv_int4_rotation128_llama31_8b"]
    assert float(data[0]["kvdsl_us"]) > 0


def test_settle_keeps_the_gpu_busy_first(tmp_path, gpu):
    argv = ["--small", "--out", str(tmp_path), "--repeats", "2", "--warmup", "1"]
    assert bench.main(argv + ["--budget", "0", "--settle", "0.3", "--variants", *VARIANTS]) == 0
    info = json.loads((tmp_path / "device.json").read_text())
    assert info["settle_s"] == 0.3 and info["floor_us"] > 0


def test_roofline_copy_moves_the_bytes_asked():
    buffers, params = roofline.copy_buffers(1000)
    assert params["count"] * 64 == roofline.copy_bytes(1000) == 1024
    assert {b.size for b in buffers.values()} == {4 * params["count"]} and len(buffers) == 4
    assert len({id(b) for b in buffers.values()}) == 4  # four distinct arrays, never aliased


def test_a_failed_run_is_one_line(tmp_path, monkeypatch, capsys):
    """A failure of the run itself (here the device's timestamps) is one line and exit 1."""
    from kvdsl.runtime import DeviceError

    def fail(args, log):
        raise DeviceError("timestamps of empty_dispatch are out of order: [[5, 0]]")

    monkeypatch.setattr(bench, "run", fail)
    argv = ["--small", "--out", str(tmp_path)]
    assert bench.main(argv) == 1
    assert capsys.readouterr().err == (
        "gpu.py: DeviceError: timestamps of empty_dispatch are out of order: [[5, 0]]\n"
    )


def test_slow_copy_against_the_floor_and_the_best_bandwidth():
    # 134 MB at 4,000 GB/s beside a 4 µs floor: 37.5 µs expected, slow past 1.4x that.
    assert not bench.slow_copy(38.0, 134_000_000, 4.0, 4000.0)
    assert bench.slow_copy(53.0, 134_000_000, 4.0, 4000.0)  # 2.5 TB/s: a slow state
    # A 1-token copy: the floor dominates (5.2 µs is usual on the H200, 7-11 µs slow).
    assert not bench.slow_copy(5.2, 65_536, 4.0, 4000.0)
    assert bench.slow_copy(7.2, 65_536, 4.0, 4000.0)


def test_a_row_beside_a_slow_copy_is_timed_again(tmp_path, monkeypatch, gpu, capsys):
    """Every copy called slow: each row is timed 1 + --retry-slow times, then once more at the
    end of the run (its copy still slow), the kernel and the copy each keeping their fastest
    time over the attempts; --retry-slow 0 times it once."""
    from kvdsl import runtime

    copies: list[float] = []
    kernels: list[float] = []
    real = runtime.time_kernel

    def recording(kernel, *args, **kw):
        times = real(kernel, *args, **kw)
        name = getattr(kernel, "name", kw.get("label"))
        if name == "roofline_copy_vec4":
            copies.append(float(np.median(times)) * 1e6)
        elif name == "copy_llama31_8b":
            kernels.append(float(np.median(times)) * 1e6)
        return times

    monkeypatch.setattr(runtime, "time_kernel", recording)
    monkeypatch.setattr(bench, "slow_copy", lambda *a: True)
    argv = ["--small", "--repeats", "2", "--warmup", "1", "--batches", "1"]
    argv += ["--variants", "copy_llama31_8b"]
    for retries, late in ((2, 1), (0, 0)):
        copies.clear()
        kernels.clear()
        assert bench.main(argv + ["--out", str(tmp_path), "--retry-slow", str(retries)]) == 0
        out = capsys.readouterr().out
        assert ("late: 1 rows whose copy stayed slow" in out) == bool(late)
        with open(tmp_path / "gpu.csv", newline="") as f:
            (row,) = list(csv.DictReader(f))
        assert int(row["retries"]) == retries + late
        # The reference copy, then `trials` (2) copies per attempt; with --retry-slow, a
        # second of copies before each retry (none with --small).
        per_row = copies[1:]
        assert len(per_row) == 2 * (1 + retries + late)
        attempts = [min(per_row[i : i + 2]) for i in range(0, len(per_row), 2)]
        # The CSV keeps six significant digits.
        assert float(row["roofline_us"]) == pytest.approx(min(attempts), rel=5e-6)
        assert len(kernels) == 2 * (1 + retries + late)
        assert float(row["kvdsl_us"]) == pytest.approx(min(kernels), rel=5e-6)
        info = json.loads((tmp_path / "device.json").read_text())
        assert info["retry_slow"] == retries


def test_a_row_whose_copy_stayed_slow_is_timed_again_at_the_end(tmp_path, monkeypatch, gpu):
    """A slow stretch can outlast a row's retries: a row whose copy is still slow after them is
    timed once more after every other config, and rows beside copies at their usual speed are
    not."""
    from kvdsl import runtime

    slow, fine = "copy_llama31_8b", "copy_flat_llama31_8b"
    timed: list[str] = []
    real = runtime.time_kernel

    def recording(kernel, *args, **kw):
        name = getattr(kernel, "name", None)
        if name in (slow, fine):
            timed.append(name)
        return real(kernel, *args, **kw)

    monkeypatch.setattr(runtime, "time_kernel", recording)
    # The copy beside `slow`'s kernel is slow at every attempt, `fine`'s never.
    monkeypatch.setattr(bench, "slow_copy", lambda *a: bool(timed) and timed[-1] == slow)
    argv = ["--small", "--repeats", "2", "--warmup", "1", "--batches", "1"]
    argv += ["--variants", slow, fine, "--out", str(tmp_path), "--retry-slow", "1"]
    argv += ["--retry-below", "0"]
    assert bench.main(argv) == 0
    # Two trials per attempt: `slow` once and once retried, `fine` once, then `slow` late.
    assert timed == [slow] * 4 + [fine] * 2 + [slow] * 2
    with open(tmp_path / "gpu.csv", newline="") as f:
        retries = {r["variant"]: int(r["retries"]) for r in csv.DictReader(f)}
    assert retries == {slow: 2, fine: 0}


def test_a_short_row_is_timed_again(tmp_path, monkeypatch, gpu):
    """A row short of its target (copies fine) is timed again up to --retry-slow times; with
    --retry-below 0 no row is short."""
    monkeypatch.setattr(bench, "slow_copy", lambda *a: False)
    calls: list[float] = []
    real = bench.short

    def short(row, pct):
        calls.append(pct)
        return real(row, pct) if pct == 0 else True

    monkeypatch.setattr(bench, "short", short)
    argv = ["--small", "--repeats", "2", "--warmup", "1", "--batches", "1"]
    argv += ["--variants", "copy_llama31_8b", "--out", str(tmp_path)]
    for below, retries in ((75.5, 2), (0, 0)):
        calls.clear()
        assert bench.main(argv + ["--retry-below", str(below)]) == 0
        with open(tmp_path / "gpu.csv", newline="") as f:
            rows = list(csv.DictReader(f))
        # Short rows beside copies at their usual speed: no late retry at the end.
        assert [int(r["retries"]) for r in rows] == [retries] * len(rows)
        assert set(calls) == {below}
        assert json.loads((tmp_path / "device.json").read_text())["retry_below"] == below


def test_short_against_the_targets():
    prefill = {"decode": 0, "floor_us": 4.0, "roofline_us": 90.0}
    assert bench.short(prefill | {"kvdsl_us": 101.0}, 90)  # 89%
    assert not bench.short(prefill | {"kvdsl_us": 99.0}, 90)  # 91%
    assert not bench.short(prefill | {"kvdsl_us": 200.0}, 0)  # 0: never
    assert not bench.short(prefill | {"kvdsl_us": None}, 90)  # nothing measured
    decode = {"decode": 1, "floor_us": 4.0, "roofline_us": 5.0}
    assert bench.short(decode | {"kvdsl_us": 6.1}, 90)  # 1.525x the floor
    assert not bench.short(decode | {"kvdsl_us": 5.9}, 90)  # 1.475x, though 85% of the copy


def test_fastest_keeps_each_sides_fastest_time():
    row = {"kvdsl_us": 10.0, "kvdsl_status": "ok", "roofline_us": 8.0, "template_us": 50.0,
           "template_status": "ok", "batch": 4}  # fmt: skip
    again = {"kvdsl_us": 9.0, "kvdsl_status": "ok", "roofline_us": 8.5, "template_status": "boom"}
    got = bench.fastest(row, again)
    assert got == row | {"kvdsl_us": 9.0}
    assert row["kvdsl_us"] == 10.0  # not modified
    # A side that failed the first time takes the retry's time and status.
    failed = {"kvdsl_status": "DeviceError: lost", "template_status": "DeviceError: lost"}
    ok = {"kvdsl_us": 9.0, "kvdsl_status": "ok", "roofline_us": 8.5, "template_us": 40.0,
          "template_status": "ok"}  # fmt: skip
    assert bench.fastest(failed, ok) == ok


def test_retry_below_takes_a_percentage(capsys):
    for bad, why in (("120", "120 is not a percentage: give 0 to 100"), ("x", "'x' is not a")):
        with pytest.raises(SystemExit) as exit_:
            bench.main(["--small", "--retry-below", bad])
        assert exit_.value.code == 2
        err = capsys.readouterr().err
        assert "--retry-below" in err and why in err


def test_retry_slow_takes_a_count(capsys):
    with pytest.raises(SystemExit) as exit_:
        bench.main(["--small", "--retry-slow", "-1"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "--retry-slow" in err and "-1 is negative: give 0 or more" in err


@pytest.mark.parametrize("script", ["compile.py", "interp.py", "interp_corpus.py", "parse.py"])
def test_benchmark_scripts_take_a_positive_repeat(script):
    # --repeat 0 would divide by zero.
    import subprocess

    path = BENCHMARKS / script
    out = subprocess.run(
        [sys.executable, str(path), "--repeat", "0"], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 2
    assert "argument --repeat: 0 is out of range: give 1 or more" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize(
    "option, value, message",
    [
        ("--variants", "nope", "unknown variant 'nope'"),
        ("--template", "/no/such/kv_cache.wgsl.jinja", "--template: no such file '/no/such/"),
        ("--out", "{file}/sub", "--out: cannot write to '"),
    ],
)
def test_bench_bad_paths_and_names_are_one_line(tmp_path, capsys, gpu, option, value, message):
    # Neither a missing --template (no silent fallback) nor an --out that cannot be made is a
    # traceback.
    (tmp_path / "file").write_text("not a folder")
    value = value.replace("{file}", str(tmp_path / "file"))
    argv = ["--small", "--repeats", "2", "--warmup", "1", option, value]
    if option != "--variants":
        argv += ["--variants", "copy_llama31_8b"]
    assert bench.main(argv) == 2
    assert f"gpu.py: {message}" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args, message",
    [
        (["--template", "/no/such.jinja"], "--template: no such file '/no/such.jinja'"),
        (["--out", "{file}/sub"], "--out: cannot write to '"),
    ],
)
def test_compile_benchmark_bad_paths_fail_before_timing(tmp_path, args, message):
    import subprocess

    (tmp_path / "file").write_text("not a folder")
    args = [a.replace("{file}", str(tmp_path / "file")) for a in args]
    path = BENCHMARKS / "compile.py"
    out = subprocess.run(
        [sys.executable, str(path), "--no-interp", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2
    assert f"compile.py: error: {message}" in out.stderr
    assert "kvdsl:" not in out.stdout  # nothing timed


@pytest.mark.parametrize(
    "option, value, why",
    [
        ("--trials", "0", "0 is out of range: give 1 or more"),
        ("--batches", "0", "0 is out of range: give 1 or more"),
        ("--batches", "-1", "-1 is out of range: give 1 or more"),
        ("--repeats", "0", "0 is out of range: give 1 to 2048"),
        ("--repeats", "5000", "5000 is out of range: give 1 to 2048"),
        ("--warmup", "-1", "-1 is negative: give 0 or more"),
        ("--budget", "-5", "-5 is not a time: give 0 or more seconds"),
        ("--budget", "soon", "'soon' is not a number of seconds"),
        ("--settle", "-1", "-1 is not a time: give 0 or more seconds"),
        ("--settle", "nan", "nan is not a time: give 0 or more seconds"),
    ],
)
def test_options_out_of_range_are_one_line(capsys, option, value, why):
    # Each would otherwise run wrongly: untimed rows (--trials 0), none (--budget -5), or an
    # internal error (--batches -1, --repeats 0).
    with pytest.raises(SystemExit) as exit_:
        bench.main(["--small", option, value])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"gpu.py: error: argument {option}: {why}" in err and "Traceback" not in err
