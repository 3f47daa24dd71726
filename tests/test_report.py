"""benchmarks/report.py: merging runs, the never-flattering % best, and the target lines it prints
(the figures docs/performance.md states), on hand-made rows."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import report  # noqa: E402


def row(variant, walk, us, copy_us, template_us=None, batch=4, tokens=2048, decode=0, mb=134.0):
    """A CSV row as ``report.load`` returns it: ``mb`` megabytes moved in ``us`` microseconds."""
    nbytes = mb * 1e6
    r = {"variant": variant, "mode": variant.split("_")[0], "options": f"walk={walk}",
         "batch": batch, "tokens": tokens, "decode": decode, "bytes": nbytes,
         "kvdsl_us": us, "kvdsl_gbps": nbytes / us / 1e3, "roofline_us": copy_us,
         "roofline_gbps": nbytes / copy_us / 1e3, "pct_roofline": 100 * copy_us / us,
         "template_us": template_us, "floor_us": 4.0}  # fmt: skip
    if template_us:
        r["template_pct_roofline"] = 100 * copy_us / template_us
        r["template_over_kvdsl"] = template_us / us
    if decode:
        r["floor_x"] = us / 4.0
    return r


def test_merge_keeps_the_first_run_of_each_row(tmp_path):
    header = "variant,batch,tokens,kvdsl_us\n"
    (tmp_path / "gpu-a.csv").write_text(header + "x,4,1,5.0\ny,4,1,7.0\n")
    (tmp_path / "gpu-b.csv").write_text(header + "x,4,1,9.0\nz,1,1,3.0\n")
    rows = report.merge([tmp_path / "gpu-a.csv", tmp_path / "gpu-b.csv"])
    got = {(r["variant"], r["run"]): r["kvdsl_us"] for r in rows}
    assert got == {("x", "a"): 5.0, ("y", "a"): 7.0, ("z", "b"): 3.0}


def test_merge_can_keep_the_row_beside_the_fastest_copy(tmp_path):
    # x: run b's copy ran faster (its row wins, though its kernel measured slower); y: a tie
    # keeps the first; z: only run b has it; w: a copy not timed never wins over a timed one.
    header = "variant,batch,tokens,kvdsl_us,roofline_us\n"
    (tmp_path / "gpu-a.csv").write_text(header + "x,4,1,5.0,9.0\ny,4,1,7.0,6.0\nw,4,1,2.0,\n")
    (tmp_path / "gpu-b.csv").write_text(header + "x,4,1,6.0,5.0\ny,4,1,8.0,6.0\nz,1,1,3.0,4.0\n"
                                        "w,4,1,4.0,8.0\n")  # fmt: skip
    rows = report.merge([tmp_path / "gpu-a.csv", tmp_path / "gpu-b.csv"], "fastest-copy")
    got = {(r["variant"], r["run"]): r["kvdsl_us"] for r in rows}
    assert got == {("x", "b"): 6.0, ("y", "a"): 7.0, ("z", "b"): 3.0, ("w", "b"): 4.0}


def test_changed_kernels_take_rows_from_their_new_runs_alone(tmp_path):
    # x changed after runs a and b: run c's rows replace both (its decode row included, and
    # though run a's copy ran faster); y did not change and keeps the older runs' pick.
    header = "variant,batch,tokens,kvdsl_us,roofline_us\n"
    (tmp_path / "gpu-a.csv").write_text(
        header + "x,4,1,5.0,2.0\nx,4,2048,50.0,40.0\ny,4,1,7.0,6.0\n"
    )
    (tmp_path / "gpu-b.csv").write_text(header + "x,4,1,6.0,9.0\ny,4,1,8.0,5.0\n")
    (tmp_path / "gpu-c.csv").write_text(header + "x,4,1,4.0,5.0\n")
    older = report.merge([tmp_path / "gpu-a.csv", tmp_path / "gpu-b.csv"], "fastest-copy")
    rows = report.supersede(older, report.merge([tmp_path / "gpu-c.csv"], "fastest-copy"))
    got = {(r["variant"], r["tokens"], r["run"]): r["kvdsl_us"] for r in rows}
    assert got == {("x", 1, "c"): 4.0, ("y", 1, "b"): 8.0}


def test_a_latest_run_replaces_the_rows_it_measured(tmp_path):
    # Run c measured x at batch 4 only: that row comes from c though run a's copy ran faster;
    # x at batch 1 and y keep the older runs' pick; a changed variant's rows from c win too.
    header = "variant,batch,tokens,kvdsl_us,roofline_us\n"
    (tmp_path / "gpu-a.csv").write_text(header + "x,4,1,5.0,2.0\nx,1,1,3.0,2.0\ny,4,1,7.0,6.0\n")
    (tmp_path / "gpu-b.csv").write_text(header + "z,4,1,6.0,5.0\nz,1,1,2.0,1.0\n")
    (tmp_path / "gpu-c.csv").write_text(header + "x,4,1,6.0,9.0\nz,4,1,4.0,5.0\n")
    rows = report.runs(
        [tmp_path / "gpu-a.csv"], [tmp_path / "gpu-b.csv"], "fastest-copy", [tmp_path / "gpu-c.csv"]
    )
    got = {(r["variant"], r["batch"], r["run"]): r["kvdsl_us"] for r in rows}
    assert got == {("x", 4, "c"): 6.0, ("x", 1, "a"): 3.0, ("y", 4, "a"): 7.0,
                   ("z", 4, "c"): 4.0, ("z", 1, "b"): 2.0}  # fmt: skip
    # A later --latest run (d: z changed again after c, at both batches) wins over c, though
    # c's copy ran faster; c keeps x.
    (tmp_path / "gpu-d.csv").write_text(header + "z,4,1,4.5,6.0\nz,1,1,2.5,1.5\n")
    rows = report.runs(
        [tmp_path / "gpu-a.csv"],
        [tmp_path / "gpu-b.csv"],
        "fastest-copy",
        [tmp_path / "gpu-c.csv", tmp_path / "gpu-d.csv"],
    )
    got = {(r["variant"], r["batch"], r["run"]): r["kvdsl_us"] for r in rows}
    assert got == {("x", 4, "c"): 6.0, ("x", 1, "a"): 3.0, ("y", 4, "a"): 7.0,
                   ("z", 4, "d"): 4.5, ("z", 1, "d"): 2.5}  # fmt: skip


def test_pct_best_never_flatters():
    # A copy measured slow beside the first kernel (2,000 GB/s) against a run's best (4,000):
    # % roof says 150%, % best 75%. Rows under 64 MB keep their own copy.
    rows = [
        row("build_flat_a", "flat", 44.7, 67.0),  # 3,000 GB/s kernel, 2,000 GB/s copy
        row("copy_flat_b", "flat", 33.5, 33.5),  # 4,000 GB/s both
        row("merge_share_append_flat_c", "flat", 10.0, 9.0, mb=10.0),
    ]
    assert report.conservative(rows) == pytest.approx(4000, rel=1e-3)
    assert rows[0]["pct_roofline"] == pytest.approx(150, rel=1e-2)
    assert rows[0]["pct_best"] == pytest.approx(75, rel=1e-2)
    assert rows[1]["pct_best"] == pytest.approx(100, rel=1e-3)
    assert rows[2]["pct_best"] == pytest.approx(90, rel=1e-3)


def test_walk_and_batches():
    assert report.walk_of({"options": "region=append walk=per_row rotary=False"}) == "per_row"
    assert report.walk_of({"options": "vec4=True input_type=f32"}) == "element"
    assert report.batches([{"batch": 4.0}, {"batch": 1.0}, {"batch": None}]) == [1, 4]


def test_summary_counts_the_targets():
    rows = [
        row("build_flat_a", "flat", 35.0, 33.5, template_us=350.0),  # 96%, 10x the template
        row("build_flat_b", "flat", 40.0, 33.5, template_us=360.0),  # 84%
        row("build_a", "per_row", 335.0, 33.5, template_us=330.0),  # drop-in, 0.985
        row("merge_a", "cooperative", 60.0, 33.5, template_us=50.0),  # drop-in, 0.83: below
        row("append_quant_flat_a", "flat", 5.6, 5.0, decode=1, tokens=1, mb=0.07),  # 1.4x
        row("append_quant_a", "per_row", 60.0, 5.0, 60.0, decode=1, tokens=1, mb=0.07),  # 15x
        row("merge_share_append_flat_b", "flat", 8.0, 5.0, decode=1, tokens=1, mb=0.07),  # 2x
    ]
    rows[4]["mode"] = rows[5]["mode"] = "append_quant"
    report.conservative(rows)
    text = "\n".join(report.summary(rows))
    assert "the flat variants (kvdsl's fastest walk): **1 of 2**" in text
    assert "beside them (batch 4, not decode appends): **1 of 4**" in text
    assert "flat " in text and "per_row " in text and "cooperative " in text
    assert (
        "build: fastest kvdsl variant vs fastest template render (target ≥ 3x): 2048 tok " in text
    )
    assert (
        "**2 of 3** within 5% of the template or faster (1 at ≥ 1.00, 1 at ≥ 0.99); below: " in text
    )
    assert "below: merge_a 2048 tok 0.83" in text
    assert (
        "timed beside them (the issue's measure): **1 of 2** at ≥ 90%; below: build_flat_b" in text
    )
    assert "Flat (fastest) decode appends within 1.5x of the empty dispatch: **1 of 2**" in text
    assert "range 1.40x-2.00x." in text
    assert "**1 of 3**; worst append_quant_a (batch 4) at 15.00x" in text
    # Runs before the ninth stop did not time the floor beside each row: no line.
    assert "timed beside each" not in text
    # build_a 10% and merge_a 56% of the copy: the drop-ins' line names both.
    assert (
        "Drop-in variants against the copy of the same bytes timed beside them: **0 of 2** at "
        "≥ 90%; below: build_a 2048 tok 10.0%, merge_a 2048 tok 55.8%." in text
    )


def test_decode_against_the_floor_timed_beside_each_row():
    rows = [
        row("append_quant_flat_a", "flat", 5.6, 5.0, decode=1, tokens=1, mb=0.07),
        row("merge_share_append_flat_b", "flat", 8.0, 5.0, decode=1, tokens=1, mb=0.07),
        row("append_quant_a", "per_row", 7.0, 5.0, 60.0, decode=1, tokens=1, mb=0.07),
        row("append_quant_b", "per_row", 7.0, 5.0, 60.0, decode=1, tokens=1, mb=0.07),
    ]
    # The first flat row met a fast floor beside it (1.4x); the second a slow one (8 / 6 µs);
    # append_quant_b's run did not time one.
    for r, beside in zip(rows, (4.0, 6.0, 4.0, None)):
        r["floor_beside_us"] = beside
        r["floor_beside_x"] = r["kvdsl_us"] / beside if beside else None
    text = "\n".join(report.summary(rows))
    assert (
        "- Flat decode appends at batch 4 against the empty dispatch timed beside each (the same "
        "state of the GPU; where the run timed it): **2 of 2** within 1.5x; range 1.33x-1.40x."
        in text
    )
    assert "- Drop-in decode appends at batch 4 against the empty dispatch timed beside" in text
    assert "**0 of 1** within 1.5x; range 1.75x-1.75x." in text
    # Batches apart: a batch-1 row's line of its own.
    rows[0]["batch"] = 1
    text = "\n".join(report.summary(rows))
    assert "- Flat decode appends at batch 1 against" in text and "**1 of 1**" in text


def test_glance_states_each_target_met_or_not():
    rows = [
        row("build_flat_a", "flat", 35.0, 33.5, template_us=350.0),  # 96%, 10x
        row("build_a", "per_row", 36.0, 33.5, template_us=330.0),  # drop-in 93%, 9.2x
        row("transpose_a", "element", 100.0, 33.5, template_us=99.0),  # the template's own
        row("append_quant_flat_a", "flat", 5.6, 5.0, decode=1, tokens=1, mb=0.07),  # 1.4x
        row("append_quant_a", "per_row", 5.8, 5.0, 60.0, decode=1, tokens=1, mb=0.07),  # 1.45x
    ]
    rows[2]["mode"] = "transpose"
    rows[3]["mode"] = rows[4]["mode"] = "append_quant"
    comp = {"kvdsl_s": 0.1, "jinja_s": 0.02, "ratio": 5.0}
    text = "\n".join(report.glance(rows, comp))
    assert (
        "| flat 1 of 1, drop-ins 1 of 1 (the drop-in transposes, the template's own kernel, apart: 1 rows) | **met** |"
        in text
    )
    # The transpose is the template's kernel: apart, so 0.99x does not fail the drop-ins.
    assert "| 2 of 2 at ≥ 1.00, 2 within 5% (the drop-in transposes" in text
    assert "apart: 0.99000-0.99000) | **met** |" in text
    assert "build ≥ 9.4x, append_quant ≥ 10.7x | **met** |" in text
    assert (
        "flat at batch 4 1 of 1 (1.40-1.40x); drop-ins at batch 4 1 of 1 (1.45-1.45x) | **met**"
        in text
    )
    assert "| 100.0 ms against 20.0 ms (5.00x) | **not met** |" in text
    # One drop-in under 90% of its copy, one decode append over 1.5x its floor timed beside it.
    rows[1]["pct_roofline"] = 89.0
    rows[4]["floor_beside_x"] = 1.6
    text = "\n".join(report.glance(rows, None))
    assert "drop-ins 0 of 1" in text and text.count("**not met**") == 2
    assert "jinja2" not in text  # no compile.json: no compiler row


def test_compile_section_names_the_reading_it_shows():
    data = {
        "variants": 3,
        "kvdsl_s": 0.19,
        "kvdsl_first_s": 0.2,
        "renders": 3,
        "jinja_s": 0.03,
        "jinja_first_s": 0.035,
        "ratio": 0.19 / 0.03,
    }
    text = "\n".join(report.compile_section(data))
    assert "kvdsl / jinja2 = **6.33**" in text and "The reading" not in text
    text = "\n".join(report.compile_section(data | {"note": "the median of three, run 93"}))
    assert "- The reading: the median of three, run 93." in text


def test_dropin_transposes_are_counted_apart():
    rows = [
        row("copy_a", "cooperative", 35.0, 33.5),  # 96%
        row("transpose_a", "element", 100.0, 33.5),  # the template's kernel, 34%
        row("transpose_flat_a", "element", 35.0, 33.5),  # a flat row, not a drop-in
    ]
    for r in rows[1:]:
        r["mode"] = "transpose"
    text = report.dropins_beside(rows)
    assert text == (
        "- Drop-in variants against the copy of the same bytes timed beside them: **1 of 1** at "
        "≥ 90%; below: none (the drop-in transposes, the template's own kernel, apart: "
        "transpose_a 34%)."
    )


def test_dawn_runs_with_toggles_on_are_named(tmp_path):
    on, off, bare = (tmp_path / f"gpu-run{n}-dawn.csv" for n in (94, 60, 14))
    (tmp_path / "gpu-run94-dawn-device.json").write_text(
        json.dumps({"dawn_toggles": {"enable": ["vulkan_enable_f16_on_nvidia"], "disable": []}})
    )
    (tmp_path / "gpu-run60-dawn-device.json").write_text(
        json.dumps({"dawn_toggles": {"enable": [], "disable": ["disable_robustness"]}})
    )
    assert report.toggled(on) == "run94-dawn: vulkan_enable_f16_on_nvidia"
    assert report.toggled(off) is None and report.toggled(bare) is None  # none on; no file
    dawn = [row("merge_flat_b", "flat", 33.5, 33.5) | {"floor_us": 5.0, "kvdsl_status": "ok"}]
    report.conservative(dawn)
    text = report.page([], {}, None, None, dawn=dawn, dawn_toggled=[report.toggled(on)])
    assert "(`KVDSL_DAWN_ENABLE`), which Chrome leaves off: run94-dawn: vulkan_enable" in text


def test_dawn_section_sets_each_row_beside_wgpu_native():
    native = [
        row("build_flat_a", "flat", 40.0, 38.0),
        row("append_quant_flat_a", "flat", 5.5, 5.2, decode=1, tokens=1, mb=0.07),
    ]
    for r in native:
        r["run"] = "run13"
    dawn = [
        row("build_flat_a", "flat", 44.0, 38.0),  # 86% of the copy beside it, 1.10x wgpu-native
        row("append_quant_flat_a", "flat", 7.0, 6.6, decode=1, tokens=1, mb=0.07),
        row("merge_flat_b", "flat", 33.5, 33.5),  # no wgpu-native row
    ]
    for r in dawn:
        r["floor_us"], r["kvdsl_status"] = 5.0, "ok"
    dawn[1]["floor_x"] = 7.0 / 5.0
    report.conservative(dawn)
    text = "\n".join(report.dawn_section(dawn, native))
    assert "(not decode appends): **1 of 2**" in text
    assert "below: build_flat_a 2048 tok 76%" in text  # 134 MB in 44 µs against 4,000 GB/s
    # The flat and drop-in counts, as the wgpu-native summary gives them (no drop-in here).
    assert "(the issue's measure): **1 of 2** at ≥ 90%; below: build_flat_a 2048 tok 86%." in text
    assert "timed beside them: **0 of 0** at ≥ 90%; below: none." in text
    assert "empty dispatch (5.00 µs): **1 of 1** (1.40x-1.40x)" in text
    assert "geometric mean 1.18, range 1.10-1.27" in text
    assert "| build_flat_a | 4 | 2048 | 44.00 |" in text and "| 40.00 | 1.10 |" in text
    assert "| merge_flat_b | 4 | 2048 | 33.50 |" in text and "| – | – |" in text
    assert "timed beside each" not in text  # no row of these runs timed one
    dawn[1]["floor_beside_us"], dawn[1]["floor_beside_x"] = 6.0, 7.0 / 6.0
    text = "\n".join(report.dawn_section(dawn, native))
    assert "- Flat decode appends at batch 4 against the empty dispatch timed beside" in text
    assert "**1 of 1** within 1.5x; range 1.17x-1.17x." in text


def test_rows_of_variants_gone_from_the_catalog_are_left_out():
    rows = [row("build_flat_a", "flat", 35.0, 33.5), row("build_flat_old", "flat", 40.0, 33.5)]
    kept, gone = report.current(rows, {"build_flat_a", "build_flat_b"})
    assert [r["variant"] for r in kept] == ["build_flat_a"] and gone == ["build_flat_old"]


def test_rows_beside_a_slow_copy_say_so():
    rows = [row("build_flat_a", "flat", 35.0, 33.5), row("build_flat_b", "flat", 35.0, 70.0)]
    report.conservative(rows)
    assert [r["slow_copy"] for r in rows] == [False, True]
    text = "\n".join(report.tables(rows))
    assert text.count("the copy beside it ran slow") == 1


def test_bad_files_are_one_line_before_any_page(tmp_path, capsys):
    # Each used to end in a traceback (FileNotFoundError, or a TypeError deep in the page).
    good = tmp_path / "gpu-a.csv"
    good.write_text("variant,batch,tokens,kvdsl_us,roofline_us\nx,4,1,5.0,2.0\n")
    other = tmp_path / "notes.csv"
    other.write_text("name,value\na,1\n")
    docs = tmp_path / "docs"
    for argv, message in (
        (["--csv", str(tmp_path / "none.csv")], f"no such file '{tmp_path / 'none.csv'}'"),
        (["--csv", str(good), "--note", str(tmp_path / "n.md")], "no such file"),
        (
            ["--csv", str(good), "--latest", str(other)],
            f"{other}: not a gpu.csv of benchmarks/gpu.py (no 'variant')",
        ),
        (["--csv", str(good), "--dawn", str(tmp_path / "d.csv")], "no such file"),
    ):
        with pytest.raises(SystemExit) as exit_:
            report.main(argv + ["--docs", str(docs)])
        assert exit_.value.code == 2
        assert f"error: {message}" in capsys.readouterr().err
        assert not docs.exists()


def test_runs_of_the_wrong_implementation_are_one_line_before_any_page(tmp_path, capsys):
    # Each was taken silently: a wgpu-native run as --dawn made a Dawn section of wgpu-native's
    # rows, runs of both implementations pooled into one table, and a folder without
    # device.json ended in a StopIteration traceback.
    header = "variant,batch,tokens,kvdsl_us,roofline_us\nx,4,1,5.0,2.0\n"
    folder = tmp_path / "runs"
    folder.mkdir()
    for stem, impl in (("gpu-run1", "wgpu-native"), ("gpu-run2-dawn", "dawn")):
        (folder / f"{stem}.csv").write_text(header)
        (folder / f"{stem}-device.json").write_text(json.dumps({"implementation": impl}))
    (folder / "gpu-run3.csv").write_text(header)  # no device file: taken as given
    native, dawn, bare = (folder / f"{s}.csv" for s in ("gpu-run1", "gpu-run2-dawn", "gpu-run3"))
    lone = tmp_path / "lone"
    lone.mkdir()
    (lone / "gpu.csv").write_text(header)
    docs = tmp_path / "docs"
    (folder / "device.json").write_text(json.dumps({"implementation": "wgpu-native"}))
    for argv, message in (
        (
            ["--csv", str(native), "--dawn", str(native)],
            f"--dawn: {native} ran under wgpu-native (gpu-run1-device.json); --dawn takes runs "
            "under Dawn (KVDSL_WEBGPU=dawn)",
        ),
        (
            ["--csv", str(native), "--latest", str(dawn)],
            f"--csv: {dawn} ran under dawn and {native} under wgpu-native: a page pools the "
            "runs of one implementation (give Dawn's as --dawn)",
        ),
        (
            ["--csv", str(dawn)],
            f"--csv: {dawn} ran under dawn, but the page's device file {folder / 'device.json'} "
            "says wgpu-native",
        ),
        (
            ["--csv", str(lone / "gpu.csv")],
            "--csv: no device.json beside any run (benchmarks/gpu.py writes one beside its "
            "gpu.csv; the page's device section reads it)",
        ),
    ):
        with pytest.raises(SystemExit) as exit_:
            report.main(argv + ["--docs", str(docs)])
        assert exit_.value.code == 2
        assert f"error: {message}" in capsys.readouterr().err
        assert not docs.exists()
    assert report.implementation(bare) is None and report.implementation(dawn) == "dawn"
    (lone / "device.json").write_text(json.dumps({"implementation": "dawn"}))
    assert report.implementation(lone / "gpu.csv") == "dawn"  # gpu.py's own folder
