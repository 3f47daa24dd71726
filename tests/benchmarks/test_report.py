"""benchmarks/report.py: the targets it counts, the page it writes, and the committed page being
what it makes from the committed results."""

from __future__ import annotations

import dataclasses
import difflib
import json
import re

import pytest

from tests.helpers.paths import ROOT, benchmark

report = benchmark("report")

HEADER = "mode,variant,options,batch,tokens,decode,kvdsl_us,roofline_us,pct_roofline\n"


def row(variant, walk, us, copy_us, template_us=None, batch=4, tokens=2048, decode=0):
    """A CSV row as ``report.load`` returns it."""
    r = {"variant": variant, "mode": variant.rsplit("_", 1)[0].removesuffix("_flat"),
         "options": f"walk={walk}", "batch": batch, "tokens": tokens, "decode": decode,
         "kvdsl_us": us, "roofline_us": copy_us, "pct_roofline": 100 * copy_us / us,
         "template_us": template_us, "floor_us": 4.0}  # fmt: skip
    if template_us:
        r["template_pct_roofline"] = 100 * copy_us / template_us
        r["template_over_kvdsl"] = template_us / us
    if decode:
        r["floor_x"] = us / 4.0
    return r


def results(rows, comp=None, reasons=None, dawn=()):
    device = {"device": "GPU", "backend": "Vulkan", "description": "1.0",
              "implementation": "wgpu-native", "floor_us": 4.0, "heads": 8, "head_dim": 128,
              "sizes": {"cache": 8192, "prefill": 2048}, "date": "2026-01-02"}  # fmt: skip
    dawn_device = device | {"implementation": "dawn"} if dawn else None
    return report.Results(list(rows), device, comp, list(dawn), dawn_device, reasons or {})


def target_and_page(table: str, rows: list[dict]) -> tuple[tuple[str, bool], str]:
    """The target of results whose ``table`` (dense, qkv, paged) holds ``rows``, measured on the
    device of the rest, as (figure, met), and their caches page; results without the table
    state no such target."""
    res = results([row("build_flat", "flat", 35.0, 33.5)])
    assert table not in {k for k, _, _ in report.targets(res)}
    res = dataclasses.replace(res, **{table: rows, f"{table}_device": res.device})
    got = {k: (figure, ok) for k, figure, ok in report.targets(res)}
    return got[table], report.caches_page(res, "report")


def test_targets_are_counted_at_the_largest_batch():
    rows = [
        row("build_flat", "flat", 35.0, 33.5, template_us=350.0),  # 96%, 10x the template
        row("build_flat", "flat", 40.0, 33.5, template_us=360.0, tokens=8192),  # 84%
        row("build_a", "per_row", 36.0, 33.5, template_us=360.0),  # drop-in 93%, 10x
        row("merge_a", "cooperative", 60.0, 33.5, template_us=50.0),  # drop-in 56%, 0.83x
        row("transpose_a", "element", 100.0, 33.5, template_us=99.0),  # the template's own
        row("build_a", "per_row", 30.0, 33.5, batch=1),  # batch 1: not counted
        row("append_quant_flat", "flat", 5.6, 5.0, decode=1, tokens=1),  # 1.4x
        row("append_quant_a", "per_row", 5.8, 5.0, 60.0, decode=1, tokens=1),  # 1.45x, beside 1.6
        row("append_quant_a", "per_row", 5.0, 5.0, 60.0, decode=1, tokens=1, batch=1),  # 1.25x
    ]
    rows[7]["floor_beside_x"] = 1.6
    comp = {"kvdsl_s": 0.1, "jinja_s": 0.02, "ratio": 5.0, "variants": 3}
    got = {k: (figure, ok) for k, figure, ok in report.targets(results(rows, comp))}
    assert got["flat"] == (
        "batch 4: 1 of 2 (below: build_flat 8,192 tok 83.8%)",
        False,
    )
    assert got["dropin"] == (
        "batch 4: 1 of 2 (56-93%; the 1 drop-in transpose rows, the template's own kernel, apart)",
        False,
    )
    assert got["template"] == ("batch 4: 2 of 3 at ≥ 1.00x the template's speed", False)
    assert got["per_row"] == ("build ≥ 9.0x, append_quant ≥ 10.7x", True)
    assert got["decode"] == (
        "flat at batch 4 1 of 1 (1.40-1.40x); drop-ins at batch 4 0 of 1 (1.60-1.60x); "
        "drop-ins at batch 1 1 of 1 (1.25-1.25x)",
        False,
    )
    assert got["compiler"] == ("100.0 ms against 20.0 ms (5.00x; 3 variants)", False)
    # No compile.json: no compiler target.
    assert "compiler" not in {k for k, _, _ in report.targets(results(rows))}


def test_each_target_not_met_has_one_line_with_its_reason():
    rows = [
        row("build_flat", "flat", 40.0, 33.5, template_us=360.0),  # 84%
        row("build_a", "per_row", 36.0, 33.5, template_us=400.0),  # 93%
    ]
    text = report.page(
        results(rows, reasons={"flat": "the spread."}), "python benchmarks/report.py"
    )
    assert f"- {report.TARGETS['flat']}: the spread." in text
    assert text.count("**not met**") == 1 and "no reason recorded" not in text
    text = report.page(results(rows), "python benchmarks/report.py")
    assert f"- {report.TARGETS['flat']}: no reason recorded" in text
    rows[0]["kvdsl_us"], rows[0]["pct_roofline"] = 33.5, 100.0
    text = report.page(results(rows, reasons={"flat": "the spread."}), "x")
    assert "Not met" not in text and "the spread." not in text


def test_one_table_per_mode_with_the_template_and_dawn_beside():
    rows = [
        row("build_flat", "flat", 35.0, 33.5, template_us=350.0),
        row("build_flat", "flat", 70.0, 67.0, template_us=700.0, tokens=8192),
        row("merge_share_flat", "flat", 5.6, 5.0, decode=1, tokens=1),
        row("build_flat", "flat", 30.0, 33.5, batch=1),  # batch 1: in the CSV only
    ]
    dawn = [row("build_flat", "flat", 40.0, 38.0)]
    text = "\n".join(report.tables(rows, dawn))
    assert text == "\n".join(
        [
            "### build",
            "",
            "| variant | walk | 2,048 tok | template | Dawn | 8,192 tok | template | Dawn |",
            "|---|---|--:|--:|--:|--:|--:|--:|",
            "| build_flat | flat | 96% | 10.00x | 95% | 96% | 10.00x |  |",
            "",
            "### merge_share",
            "",
            "| variant | walk | 1 tok | template | Dawn |",
            "|---|---|--:|--:|--:|",
            "| merge_share_flat | flat | 1.40x floor | – |  |",
            "",
        ]
    )


def test_load_takes_only_a_benchmark_csv(tmp_path):
    good = tmp_path / "gpu.csv"
    good.write_text(HEADER + "copy,copy_a,walk=flat,4,8192,0,5.0,4.5,90\n")
    (r,) = report.load(good)
    assert r["variant"] == "copy_a" and r["kvdsl_us"] == 5.0 and r["pct_roofline"] == 90.0
    other = tmp_path / "notes.csv"
    other.write_text("name,value\na,1\n")
    with pytest.raises(ValueError, match="notes.csv: not a gpu.csv of benchmarks/gpu.py"):
        report.load(other)


def test_a_bad_folder_is_one_line_before_any_page(tmp_path, capsys):
    folder, docs = tmp_path / "run", tmp_path / "docs"
    folder.mkdir()
    cases = [(lambda: None, f"{folder}: no gpu.csv (benchmarks/all.sh writes it)")]

    def native():
        (folder / "gpu.csv").write_text(HEADER + "copy,copy_a,walk=flat,4,8192,0,5.0,4.5,90\n")
        (folder / "device.json").write_text(json.dumps({"implementation": "wgpu-native"}))
        (folder / "dawn").mkdir()
        (folder / "dawn" / "gpu.csv").write_text((folder / "gpu.csv").read_text())
        (folder / "dawn" / "device.json").write_text(json.dumps({"implementation": "wgpu-native"}))

    def dawn():
        (folder / "dawn" / "device.json").write_text(json.dumps({"implementation": "dawn"}))
        (folder / "reasons.json").write_text(json.dumps({"speed": "why"}))

    cases += [
        (native, f"{folder / 'dawn'}: device.json does not say the run was under Dawn"),
        (dawn, f"{folder / 'reasons.json'}: no target 'speed'"),
    ]
    for make, message in cases:
        make()
        with pytest.raises(SystemExit) as exit_:
            report.main([str(folder), "--docs", str(docs)])
        assert exit_.value.code == 2
        assert f"error: {message}" in capsys.readouterr().err
        assert not docs.exists()


def test_the_committed_page_is_made_from_the_committed_results():
    """docs/performance.md is what ``python benchmarks/report.py`` makes from
    benchmarks/results/h200 (the chart aside)."""
    res = report.read(report.DEFAULT)
    want = report.page(res, "python benchmarks/report.py")
    have = (ROOT / "docs" / "performance.md").read_text()
    diff = "".join(
        difflib.unified_diff(
            have.splitlines(True), want.splitlines(True), "docs/performance.md", "regenerated"
        )
    )
    assert not diff, "docs/performance.md is stale: run `python benchmarks/report.py`\n" + diff
    assert len(have.splitlines()) <= 200
    assert (ROOT / "docs" / "performance.png").is_file()
    caches = (ROOT / "docs" / "performance-caches.md").read_text()
    attention = report.report_attention.read(report.ATTENTION)
    assert caches == report.caches_page(
        res, "python benchmarks/report.py", attention
    ), "docs/performance-caches.md is stale: run `python benchmarks/report.py`"
    assert "## Paged appends" in caches and "## Fused QKV" in caches
    assert "## Decode attention" in caches


def test_the_committed_results_are_the_catalogs_and_state_their_device():
    from kvdsl import catalog

    res = report.read(report.DEFAULT)
    assert {r["variant"] for r in res.rows + res.dawn} <= set(catalog.VARIANTS)
    assert res.device["implementation"] == "wgpu-native" and res.device.get("date")
    assert res.dawn_device["implementation"] == "dawn" and res.dawn_device.get("date")
    # Every target the page says is not met has its reason.
    missed = {k for k, _, ok in report.targets(res) if not ok}
    assert missed <= set(res.reasons)
    files = [p for p in (ROOT / "benchmarks" / "results").rglob("*") if p.is_file()]
    assert len(files) <= 20


def test_the_page_keeps_no_diary():
    text = (ROOT / "docs" / "performance.md").read_text()
    assert not re.search(r"\b(runs?|probes?) [0-9]+\b|\b[a-z]+th stop\b|\bthis stop\b", text, re.I)


def counted_rows(a: str, b: str, batch_1: str) -> list[dict]:
    """Rows of variants ``a`` (90.5% of the roofline, 1.4x the floor at decode) and ``b`` (79.8%:
    below 85; 1.6x at decode, batch 1) at the largest batch and at decode, and of ``batch_1`` at
    batch 1 (not counted)."""
    return [
        row(a, "element", 37.0, 33.5),
        row(b, "element", 42.0, 33.5),
        row(batch_1, "element", 80.0, 33.5, batch=1),
        row(a, "element", 5.6, 5.0, decode=1, tokens=1),
        row(b, "element", 6.4, 5.0, decode=1, tokens=1, batch=1),
    ]


QKV = counted_rows("qkv_llama", "qkv_qwen3", "qkv_gemma")
QKV[3] |= {"chain_us": 17.4, "chain_x": 3.1}
QKV[4] |= {"chain_us": 9.6, "chain_x": 1.5}
CONTIGUOUS = {"contiguous": "merge_share append (contiguous)"}

#: table -> (its rows, the target's (figure, met), lines of the caches page): the dense and qkv
#: targets count prefill rows at the largest batch and every decode row (qkv's also against the
#: chain), the paged target states the time over the contiguous append.
TARGETS = {
    "dense": (
        counted_rows("dense_append_int8", "dense_append_q4_0", "dense_append_q8_0"),
        ("batch 4: 1 of 2 (80-91%); decode 1 of 2 (1.40-1.60x)", False),
        ["## Dense formats (batch 4; `docs/formats.md`)"],
    ),
    "qkv": (
        QKV,
        (
            "batch 4: 1 of 2 (80-91%); decode 1 of 2 (1.40-1.60x); against the chain at decode 1"
            " of 2 (1.50-3.10x)",
            False,
        ),
        ["## Fused QKV (batch 4; `docs/modes.md`)", "| qkv_llama | 4 | 1 | 5.60 | "],
    ),
    "paged": (
        [
            row("paged_append_a", "element", 37.0, 33.5)
            | CONTIGUOUS
            | {"kvdsl_over_contiguous": 1.04},
            row("paged_append_b", "element", 5.6, 5.0, decode=1, tokens=1)
            | CONTIGUOUS
            | {"kvdsl_over_contiguous": 0.98},
        ],
        (
            "batch 4: 1 of 1 (91-91%); decode 1 of 1 (1.40-1.40x); time over the contiguous"
            " append 0.98-1.04x",
            True,
        ),
        ["| paged_append_a | 2,048 | merge_share append (contiguous) | 1.04x |"],
    ),
}


@pytest.mark.parametrize("table", TARGETS)
def test_a_tables_target_and_page(table):
    rows, want, lines = TARGETS[table]
    target, page = target_and_page(table, rows)
    assert target == want
    for line in lines:
        assert line in page
