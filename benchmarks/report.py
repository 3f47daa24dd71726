"""Regenerate ``docs/performance.md`` and its chart from the benchmark's output.

    python benchmarks/report.py [--csv benchmarks/out/gpu.csv ...] [--note NOTE.md]
                                [--dawn DAWN.csv ...] [--docs docs]

Reads ``gpu.csv`` and ``device.json`` (and ``compile.json`` when present) from the CSV's folder,
writes ``docs/performance.png`` (% of the vec4 copy roofline per variant at the largest batch,
kvdsl beside the template; needs matplotlib, the ``bench`` extra) and ``docs/performance.md``:
the device, the issue's targets in one table (met or not) and the rows behind each, the chart, the
compiler, the method, every row by mode, and last the ``--note`` (the runs and the probes).
``--dawn`` adds a section for a run under ``KVDSL_WEBGPU=dawn``, each row beside the same row
under wgpu-native.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
TARGET_ROOFLINE, TARGET_PER_ROW, TARGET_FLOOR = 90.0, 3.0, 1.5
#: A copy of 64 MB or more under this share of the runs' best ran in a slow state of the GPU:
#: copies at these sizes take 2.9-4.1 TB/s when the GPU runs at speed, 1.2-2.3 in slow states.
SLOW_COPY = 0.6
PER_ROW_MODES = ("build", "build_quant", "append_quant", "window_shift")


#: Columns every run's CSV has (``benchmarks/gpu.py``'s ``COLUMNS`` since the first runs).
REQUIRED = ("variant", "batch", "tokens", "kvdsl_us")


def load(path: Path) -> list[dict[str, Any]]:
    """The CSV's rows with numbers parsed (empty cells are None); a ValueError naming the file
    for one that is not a benchmark run's CSV."""
    rows = []
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        _check_columns(path, reader.fieldnames)
        for r in reader:
            row: dict[str, Any] = {}
            for k, v in r.items():
                try:
                    row[k] = float(v) if v not in ("", None) else None
                except ValueError:
                    row[k] = v
            rows.append(row)
    return rows


def check_run(path: Path) -> None:
    """A ValueError naming ``path`` unless its header is a benchmark run's (the rows unread)."""
    with open(path, newline="") as f:
        _check_columns(path, csv.DictReader(f).fieldnames)


def device_file(path: Path) -> Path | None:
    """The ``device.json`` of the run ``path``: ``gpu-runN-device.json`` beside a kept
    ``gpu-runN.csv`` (as ``results/h200`` keeps them), ``device.json`` beside a ``gpu.csv``
    that ``benchmarks/gpu.py`` wrote; None where there is none (the oldest kept runs)."""
    for name in (f"{path.stem}-device.json", "device.json" if path.stem == "gpu" else None):
        if name and (path.parent / name).is_file():
            return path.parent / name
    return None


def implementation(path: Path) -> str | None:
    """The WebGPU implementation the run ``path`` ran under, as its :func:`device_file` says;
    None where it has none."""
    found = device_file(path)
    return json.loads(found.read_text()).get("implementation") if found else None


def toggled(path: Path) -> str | None:
    """``"runN: toggle, ..."`` where the run ``path`` ran with Dawn toggles turned on
    (``KVDSL_DAWN_ENABLE``, its :func:`device_file`'s ``dawn_toggles``), else None."""
    found = device_file(path)
    toggles = (json.loads(found.read_text()).get("dawn_toggles") or {}) if found else {}
    on = toggles.get("enable")
    return f"{path.stem.removeprefix('gpu-')}: {', '.join(on)}" if on else None


def check_implementations(main: list[Path], device: Path, dawn: list[Path]) -> None:
    """A ValueError unless the main runs (``--csv``, ``--changed``, ``--latest``) ran under one
    implementation, the one of the ``device`` file the page describes, and the ``--dawn`` runs
    under Dawn (a run without a device file is taken as given)."""
    found = {p: implementation(p) for p in main}
    known = {impl: p for p, impl in found.items() if impl}
    if len(known) > 1:
        (a, pa), (b, pb) = sorted(known.items())[:2]
        raise ValueError(
            f"--csv: {pa} ran under {a} and {pb} under {b}: a page pools the runs of one "
            "implementation (give Dawn's as --dawn)"
        )
    page = json.loads(device.read_text()).get("implementation")
    if known and page not in known:
        ((impl, p),) = known.items()
        raise ValueError(
            f"--csv: {p} ran under {impl}, but the page's device file {device} says {page}"
        )
    for p in dawn:
        impl = implementation(p)
        if impl not in (None, "dawn"):
            raise ValueError(
                f"--dawn: {p} ran under {impl} ({device_file(p).name}); --dawn takes runs under "
                "Dawn (KVDSL_WEBGPU=dawn)"
            )


def _check_columns(path: Path, columns: Any) -> None:
    missing = [c for c in REQUIRED if c not in (columns or ())]
    if missing:
        raise ValueError(f"{path}: not a gpu.csv of benchmarks/gpu.py (no {missing[0]!r})")


def merge(sources: list[Path], pick: str = "first") -> list[dict[str, Any]]:
    """Rows of several runs, one per (variant, batch, tokens); each records its ``run`` (the
    file's stem without ``gpu-``).

    ``pick="first"``: the first file that has the row wins. ``pick="fastest-copy"``: of the
    files that have it, the row whose copy beside it took least time wins (the first on a tie):
    the copy moves the row's bytes in every run, so its time says which run met the GPU in its
    best state, whatever the kernel measured. Give it only runs of the same kernels."""
    seen: dict[tuple, dict[str, Any]] = {}
    for src in sources:
        for r in load(src):
            key = _key(r)
            old = seen.get(key)
            if old is None or (pick == "fastest-copy" and _copy_us(r) < _copy_us(old)):
                seen[key] = r | {"run": src.stem.removeprefix("gpu-")}
    return list(seen.values())


def supersede(rows: list[dict[str, Any]], newer: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` with every variant that ``newer`` measured taking its rows from ``newer`` alone:
    runs of a kernel that has changed since ``rows`` were measured (its older rows, decode and
    prefill alike, no longer describe what the catalog emits)."""
    changed = {r["variant"] for r in newer}
    return [r for r in rows if r["variant"] not in changed] + newer


def replace(rows: list[dict[str, Any]], newer: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` with each row ``newer`` measured (variant, batch, tokens) taken from ``newer``: a
    whole run of the catalog's kernels in one state of the GPU stands for what it measured, and
    the other runs keep the rows it did not (another batch, say)."""
    keys = {_key(r) for r in newer}
    return [r for r in rows if _key(r) not in keys] + newer


def runs(
    sources: list[Path], changed: list[Path], pick: str, latest: list[Path] | None = None
) -> list[dict[str, Any]]:
    """:func:`merge` of ``sources``, the variants the ``changed`` runs measured taking their rows
    from those alone (:func:`supersede`), then each ``latest`` run in turn taking the rows it
    measured (:func:`replace`): a later one wins, so a run of a few kernels changed after a
    whole run follows it."""
    rows = merge(sources, pick)
    if changed:
        rows = supersede(rows, merge(changed, pick))
    for run in latest or []:
        rows = replace(rows, merge([run], pick))
    return rows


def _key(row: dict[str, Any]) -> tuple:
    """What one row of a run measures: (variant, batch, tokens)."""
    return row["variant"], row.get("batch"), row.get("tokens")


def _copy_us(row: dict[str, Any]) -> float:
    """The copy's time beside ``row`` (µs); a row without one sorts last."""
    us = row.get("roofline_us")
    return us if us else float("inf")


def current(rows: list[dict[str, Any]], names: set[str]) -> tuple[list[dict], list[str]]:
    """The rows of variants in ``names`` (the catalog's), and the variants left out: rows that
    earlier runs measured for variants the catalog no longer has."""
    kept = [r for r in rows if r["variant"] in names]
    return kept, sorted({r["variant"] for r in rows if r["variant"] not in names})


def conservative(rows: list[dict[str, Any]]) -> float | None:
    """Add ``pct_best``: bandwidth as % of the best copy bandwidth of the runs.

    The copy beside a kernel is timed in the same run, alternately with it, but the GPU here is
    shared or clock-managed: a measurement lands in a slow (~1.2-1.6 TB/s) or a fast
    (~3.2-4.1 TB/s) state, and a kernel measured fast beside a copy measured slow shows more
    than 100%. ``pct_best`` divides by the higher of the copy beside the kernel and the best copy
    of the runs (at 64 MB or more), so it never flatters; a kernel only ever measured in the
    slow state is understated by it. A copy of 64 MB or more under :data:`SLOW_COPY` of the best
    marks its row ``slow_copy`` (its table note says so). Returns that best bandwidth (GB/s).
    """
    copies = [r["roofline_gbps"] for r in rows if r.get("roofline_gbps") and r["bytes"] >= 64e6]
    peak = max(copies, default=None)
    for r in rows:
        if not r.get("roofline_gbps") or peak is None:
            continue
        roof = max(r["roofline_gbps"], peak if r["bytes"] >= 64e6 else r["roofline_gbps"])
        r["copy_gbps"] = r["roofline_gbps"]
        r["slow_copy"] = r["bytes"] >= 64e6 and r["roofline_gbps"] < SLOW_COPY * peak
        if r.get("kvdsl_gbps"):
            r["pct_best"] = 100 * r["kvdsl_gbps"] / roof
        if r.get("template_us") and r.get("bytes"):
            r["template_pct_best"] = 100 * (r["bytes"] / r["template_us"] / 1e3) / roof
    return peak


def geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def big(rows: list[dict]) -> list[dict]:
    """The rows at the largest batch (the issue's targets are stated there)."""
    top = max((r["batch"] for r in rows if r["batch"]), default=None)
    return [r for r in rows if r["batch"] == top]


def chart(rows: list[dict], path: Path) -> bool:
    """Horizontal bars of % of roofline, kvdsl beside the template (batch as large as measured,
    decode appends left out, the axis cut at 200%); False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    # Decode appends are dispatch-bound (their figure is x floor), so they are left out.
    rows = [r for r in big(rows) if r.get("pct_best") and not r.get("decode")]
    labels = [f"{r['variant']} ({int(r['tokens'])} tok)" for r in rows]
    kv = [r["pct_best"] for r in rows]
    tp = [r.get("template_pct_best") or 0 for r in rows]
    fig, ax = plt.subplots(figsize=(10, 0.22 * len(rows) + 1.5))
    y = range(len(rows))
    ax.barh([i - 0.2 for i in y], kv, 0.4, label="kvdsl", color="#2b6cb0")
    ax.barh([i + 0.2 for i in y], tp, 0.4, label="template", color="#dd6b20")
    ax.axvline(TARGET_ROOFLINE, color="k", ls="--", lw=0.8, label=f"{TARGET_ROOFLINE:.0f}% target")
    ax.set_xlim(0, min(200, max([110, *kv, *tp])))
    ax.set_yticks(list(y), labels, fontsize=6)
    ax.invert_yaxis()
    ax.set_xlabel("% of the best vec4 copy bandwidth of the runs")
    batch = int(rows[0]["batch"]) if rows else 0
    ax.set_title(f"Batch {batch}: bandwidth as % of a vec4 copy moving the same bytes")
    ax.legend(loc="lower right", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def batches(rows: list[dict]) -> list[int]:
    """The batch sizes the rows measured."""
    return sorted({int(r["batch"]) for r in rows if r.get("batch") not in (None, "")})


def walk_of(row: dict) -> str:
    """The row's walk from its options (``transpose`` has none: one invocation per element)."""
    for part in str(row.get("options", "")).split():
        if part.startswith("walk="):
            return part[len("walk=") :]
    return "element"


def _f(v: Any, digits: int = 1) -> str:
    if v is None or v == "":
        return "–"
    return f"{v:,.{digits}f}" if isinstance(v, float) else str(v)


def _beside(rows: list[dict], what: str, digits: int) -> str:
    """``what`` against the copy of the same bytes timed beside them: how many reach the target,
    and the rows below named (their % to ``digits`` places)."""
    below = sorted(
        (r for r in rows if r["pct_roofline"] < TARGET_ROOFLINE), key=lambda r: r["pct_roofline"]
    )
    names = ", ".join(
        f"{r['variant']} {int(r['tokens'])} tok {r['pct_roofline']:.{digits}f}%" for r in below
    )
    return (
        f"- {what}: **{len(rows) - len(below)} of {len(rows)}** at ≥ {TARGET_ROOFLINE:.0f}%; "
        f"below: " + (names or "none")
    )


def flat_beside(timed: list[dict]) -> str:
    """The issue's measure for kvdsl's fastest walk: flat rows against the copy of the same bytes
    timed beside them, with the rows below named."""
    flat = [r for r in timed if "flat" in r["variant"]]
    what = (
        "Flat variants against the copy of the same bytes timed beside them (the issue's measure)"
    )
    return _beside(flat, what, 0) + "."


def dropins_beside(timed: list[dict]) -> str:
    """The drop-in variants (the template's interface) against the copy timed beside them, the
    rows below named; the drop-in transposes are the template's own kernel and counted apart."""
    drop = [r for r in timed if "flat" not in r["variant"]]
    own = [r for r in drop if r["mode"] == "transpose"]
    drop = [r for r in drop if r["mode"] != "transpose"]
    kept = ", ".join(f"{r['variant']} {r['pct_roofline']:.0f}%" for r in own)
    what = "Drop-in variants against the copy of the same bytes timed beside them"
    return (
        _beside(drop, what, 1)
        + (f" (the drop-in transposes, the template's own kernel, apart: {kept})" if own else "")
        + "."
    )


def per_row_ratios(b: list[dict]) -> dict[str, dict[float, float]]:
    """For each mode the template walks only per row: at each size, the fastest template
    render's time over kvdsl's fastest variant's (sizes without a template time left out)."""
    out: dict[str, dict[float, float]] = {}
    for mode in PER_ROW_MODES:
        m = [r for r in b if r["mode"] == mode and r.get("kvdsl_us")]
        out[mode] = {}
        for tok in sorted({r["tokens"] for r in m}):
            at_size = [r for r in m if r["tokens"] == tok]
            tmpl = [r["template_us"] for r in at_size if r.get("template_us")]
            if tmpl:
                out[mode][tok] = min(tmpl) / min(r["kvdsl_us"] for r in at_size)
    return out


def summary(rows: list[dict]) -> list[str]:
    """The issue's targets, each with its figure, met or not."""
    b = big(rows)
    timed = [r for r in b if r.get("pct_roofline") and not r.get("decode")]
    at = [r for r in timed if r["pct_roofline"] >= TARGET_ROOFLINE]
    pair = [r for r in b if r.get("template_over_kvdsl")]
    faster = [r for r in pair if r["template_over_kvdsl"] >= 1.0]
    best = [r for r in b if r.get("pct_best") and not r.get("decode")]
    at_best = [r for r in best if r["pct_best"] >= TARGET_ROOFLINE]
    flat = [r for r in best if "flat" in r["variant"]]
    out = [
        f"- Against the best copy of the runs (never flattering): **{len(at_best)} of "
        f"{len(best)}** rows at ≥ {TARGET_ROOFLINE:.0f}%; the flat variants (kvdsl's fastest walk): "
        f"**{sum(r['pct_best'] >= TARGET_ROOFLINE for r in flat)} of {len(flat)}**, geometric mean "
        f"{_f(geomean([r['pct_best'] for r in flat]))}%, "
        f"{sum(r['pct_best'] >= 75 for r in flat)} at ≥ 75%.",
        flat_beside(timed),
        dropins_beside(timed),
        (
            f"- Rows at ≥ {TARGET_ROOFLINE:.0f}% of the copy measured beside them (batch {_f(b[0]['batch'], 0)}, "
            f"not decode appends): **{len(at)} of {len(timed)}**; geometric mean kvdsl "
            f"{_f(geomean([r['pct_roofline'] for r in timed]))}%, template "
            f"{_f(geomean([r.get('template_pct_roofline') for r in timed]))}%."
            if b
            else "- no rows"
        ),
        f"- kvdsl at least as fast as the template (same variables, batch "
        f"{_f(b[0]['batch'] if b else None, 0)}): **{len(faster)} of {len(pair)}** rows; "
        f"geometric mean template/kvdsl "
        f"{_f(geomean([r['template_over_kvdsl'] for r in pair]), 2)}.",
    ]
    by_walk: dict[str, list[float]] = {}
    for r in best:
        by_walk.setdefault(walk_of(r), []).append(r["pct_best"])
    out.append(
        "- % best by walk (batch "
        + _f(b[0]["batch"] if b else None, 0)
        + ", not decode appends; geometric mean, range, rows ≥ 90%): "
        + "; ".join(
            f"{w} {_f(geomean(xs))}% ({min(xs):.0f}-{max(xs):.0f}%, "
            f"{sum(x >= TARGET_ROOFLINE for x in xs)} of {len(xs)})"
            for w, xs in sorted(by_walk.items(), key=lambda kv: -geomean(kv[1]))
        )
        + "."
    )
    for mode, ratios in per_row_ratios(b).items():
        parts = [f"{int(tok)} tok {x:.2f}x" for tok, x in ratios.items()]
        if parts:
            out.append(
                f"- {mode}: fastest kvdsl variant vs fastest template render "
                f"(target ≥ {TARGET_PER_ROW:.0f}x): " + ", ".join(parts) + "."
            )
    drop = [r for r in pair if "flat" not in r["variant"]]
    if drop:
        slow = sorted(
            (r for r in drop if r["template_over_kvdsl"] < 0.95),
            key=lambda r: r["template_over_kvdsl"],
        )
        out.append(
            f"- Drop-in variants (the template's interface): **{len(drop) - len(slow)} of {len(drop)}** "
            f"within 5% of the template or faster "
            f"({sum(r['template_over_kvdsl'] >= 1.0 for r in drop)} at ≥ 1.00, "
            f"{sum(r['template_over_kvdsl'] >= 0.99 for r in drop)} at ≥ 0.99); below: "
            + (
                ", ".join(
                    f"{r['variant']} {int(r['tokens'])} tok {r['template_over_kvdsl']:.2f}"
                    for r in slow
                )
                or "none"
            )
            + " (*Notes*, below, say why)."
        )
    flat_dec = [r for r in rows if r.get("decode") and r.get("floor_x") and "flat" in r["variant"]]
    if flat_dec:
        ok = [r for r in flat_dec if r["floor_x"] <= TARGET_FLOOR]
        out.append(
            f"- Flat (fastest) decode appends within {TARGET_FLOOR}x of the empty dispatch: "
            f"**{len(ok)} of {len(flat_dec)}**; range {min(r['floor_x'] for r in flat_dec):.2f}x-"
            f"{max(r['floor_x'] for r in flat_dec):.2f}x."
        )
    dec = [r for r in rows if r.get("decode") and r.get("floor_x")]
    if dec:
        worst = max(dec, key=lambda r: r["floor_x"])
        within = [r for r in dec if r["floor_x"] <= TARGET_FLOOR]
        out.append(
            f"- Decode-size (1-token) appends within {TARGET_FLOOR}x of the empty dispatch: "
            f"**{len(within)} of {len(dec)}**; worst {worst['variant']} (batch "
            f"{int(worst['batch'])}) at {worst['floor_x']:.2f}x."
        )
    out += beside_floor(dec)
    return out


def _yes(ok: bool) -> str:
    return "**met**" if ok else "**not met**"


def glance(rows: list[dict], comp: dict | None) -> list[str]:
    """The issue's targets in one table: each with its figure on this page, met or not (the
    lines under *Targets* give the rows behind each)."""
    b = big(rows)
    if not b:
        return ["No rows."]
    batch = _f(b[0]["batch"], 0)
    timed = [r for r in b if r.get("pct_roofline") and not r.get("decode")]
    flat = [r for r in timed if "flat" in r["variant"]]
    drop = [r for r in timed if "flat" not in r["variant"] and r["mode"] != "transpose"]
    own = [r for r in timed if "flat" not in r["variant"] and r["mode"] == "transpose"]

    def at(xs: list[dict]) -> int:
        return sum(r["pct_roofline"] >= TARGET_ROOFLINE for r in xs)

    dropped = [r for r in b if r.get("template_over_kvdsl") and "flat" not in r["variant"]]
    pair = [r for r in dropped if r["mode"] != "transpose"]
    own_pair = [r["template_over_kvdsl"] for r in dropped if r["mode"] == "transpose"]
    ge = sum(r["template_over_kvdsl"] >= 1.0 for r in pair)
    near = sum(r["template_over_kvdsl"] >= 0.95 for r in pair)
    per_row = [(m, min(x.values())) for m, x in per_row_ratios(b).items() if x]
    dec = [r for r in rows if r.get("decode") and (r.get("floor_beside_x") or r.get("floor_x"))]

    def floor_x(r: dict) -> float:
        return r.get("floor_beside_x") or r["floor_x"]

    def dec_part(label: str, xs: list[dict]) -> str:
        ok = sum(floor_x(r) <= TARGET_FLOOR for r in xs)
        return (
            f"{label} {ok} of {len(xs)} ({min(map(floor_x, xs)):.2f}-{max(map(floor_x, xs)):.2f}x)"
        )

    dec_parts = [
        dec_part(f"{'flat' if f else 'drop-ins'} at batch {bt}", xs)
        for f in (True, False)
        for bt in reversed(batches(dec))
        if (xs := [r for r in dec if ("flat" in r["variant"]) == f and r["batch"] == bt])
    ]
    out = [
        "| target (issue 7) | on this page | |",
        "|---|---|---|",
        f"| Every variant at ≥ {TARGET_ROOFLINE:.0f}% of a `vec4` copy of the same bytes timed "
        f"beside it (batch {batch}, 2,048 and 8,192 tokens and the 1-token merges and shifts) "
        f"| flat {at(flat)} of {len(flat)}, drop-ins {at(drop)} of {len(drop)}"
        + (
            f" (the drop-in transposes, the template's own kernel, apart: {len(own)} rows)"
            if own
            else ""
        )
        + f" | {_yes(at(flat) == len(flat) and at(drop) == len(drop))} |",
        f"| Every drop-in at least as fast as the template (batch {batch}) | {ge} of "
        f"{len(pair)} at ≥ 1.00, {near} within 5%"
        + (
            f" (the drop-in transposes, the template's own kernel, apart: "
            f"{min(own_pair):.5f}-{max(own_pair):.5f})"
            if own_pair
            else ""
        )
        + f" | {_yes(ge == len(pair))} |",
        "| The modes the template walks only per row at least "
        f"{TARGET_PER_ROW:.0f}x faster in kvdsl's fastest variant | "
        + ", ".join(f"{m} ≥ {x:.1f}x" for m, x in per_row)
        + f" | {_yes(bool(per_row) and all(x >= TARGET_PER_ROW for _, x in per_row))} |",
        f"| Decode (1-token) appends within {TARGET_FLOOR}x of the empty dispatch (the one timed "
        "beside each where the run timed it) | "
        + "; ".join(dec_parts)
        + f" | {_yes(bool(dec) and all(floor_x(r) <= TARGET_FLOOR for r in dec))} |",
    ]
    if comp and "jinja_s" in comp:
        out.append(
            f"| Whole-catalog build + verify + emit faster than jinja2's compile + render | "
            f"{comp['kvdsl_s'] * 1e3:.1f} ms against {comp['jinja_s'] * 1e3:.1f} ms "
            f"({comp['ratio']:.2f}x) | {_yes(comp['ratio'] < 1)} |"
        )
    return out


def beside_floor(decode: list[dict]) -> list[str]:
    """The decode appends against the empty dispatch timed beside each (runs since the ninth
    stop time it alternately with the kernel and the copy), flat ones and drop-ins, by batch."""
    rows = [r for r in decode if r.get("floor_beside_x")]
    out = []
    for label, flat in (("Flat", True), ("Drop-in", False)):
        for batch in reversed(batches(rows)):  # batch 4, the target size, first
            x = [r["floor_beside_x"] for r in rows
                 if ("flat" in r["variant"]) == flat and r["batch"] == batch]  # fmt: skip
            if x:
                out.append(
                    f"- {label} decode appends at batch {batch} against the empty dispatch timed "
                    f"beside each (the same state of the GPU; where the run timed it): "
                    f"**{sum(v <= TARGET_FLOOR for v in x)} of {len(x)}** within "
                    f"{TARGET_FLOOR}x; range {min(x):.2f}x-{max(x):.2f}x."
                )
    return out


def tables(rows: list[dict]) -> list[str]:
    """One markdown table per mode, every row of the CSV."""
    out = []
    for mode in dict.fromkeys(r["mode"] for r in rows):
        out += [
            f"### {mode}",
            "",
            "| variant | B | tokens | MB | kvdsl µs | GB/s | copy GB/s | % roof | % best | "
            "template µs | template % best | template/kvdsl | × floor | run | note |",
            "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|",
        ]
        for r in rows:
            if r["mode"] != mode:
                continue
            template = r.get("template_status")
            note = "; ".join(
                part
                for part in (
                    r.get("slow_copy") and "the copy beside it ran slow (% best is the figure)",
                    r.get("kvdsl_status") not in ("ok", None) and f"kvdsl: {r['kvdsl_status']}",
                    template != "ok" and template,
                )
                if part
            )
            mb = r["bytes"] / 1e6 if r.get("bytes") else None
            out.append(
                f"| {r['variant']} | {_f(r.get('batch'), 0)} | {_f(r.get('tokens'), 0)} | "
                f"{_f(mb, 2)} | {_f(r.get('kvdsl_us'), 2)} | {_f(r.get('kvdsl_gbps'), 0)} | "
                f"{_f(r.get('copy_gbps'), 0)} | "
                f"{_f(r.get('pct_roofline'), 0)} | {_f(r.get('pct_best'), 0)} | "
                f"{_f(r.get('template_us'), 2)} | {_f(r.get('template_pct_best'), 0)} | "
                f"{_f(r.get('template_over_kvdsl'), 2)} | {_f(r.get('floor_x'), 2)} | "
                f"{r.get('run', 1)} | {note.replace('|', '/')} |"
            )
        out.append("")
    return out


def dawn_section(dawn: list[dict], rows: list[dict]) -> list[str]:
    """The rows of a run under Dawn (``KVDSL_WEBGPU=dawn``) beside the same rows under
    wgpu-native from ``rows``: targets counted as for wgpu-native, then a table. ``dawn`` has
    been through :func:`conservative` on its own (its own best copy)."""
    native = {(r["variant"], r["batch"], r["tokens"]): r for r in rows}
    timed = [r for r in dawn if r.get("kvdsl_us")]
    for r in timed:
        other = native.get((r["variant"], r["batch"], r["tokens"]), {})
        r["native_us"] = other.get("kvdsl_us")
        r["native_run"] = other.get("run")
        r["over_native"] = r["kvdsl_us"] / r["native_us"] if r["native_us"] else None
    wide = [r for r in timed if not r.get("decode")]
    decode = [r for r in timed if r.get("decode")]
    at = sum(r["pct_roofline"] >= TARGET_ROOFLINE for r in wide)
    at_best = sum((r.get("pct_best") or 0) >= TARGET_ROOFLINE for r in wide)
    within = sum(r["floor_x"] <= TARGET_FLOOR for r in decode)
    ratios = [r["over_native"] for r in timed if r["over_native"]]
    below = ", ".join(
        f"{r['variant']} {int(r['tokens'])} tok {r['pct_best']:.0f}%"
        for r in sorted(wide, key=lambda r: r.get("pct_best") or 0)
        if (r.get("pct_best") or 0) < TARGET_ROOFLINE
    )
    floors = sorted({r["floor_us"] for r in timed if r.get("floor_us")})
    out = [
        f"- Rows at ≥ {TARGET_ROOFLINE:.0f}% of the copy timed beside them (not decode "
        f"appends): **{at} of {len(wide)}**; against the run's best copy (*% best*): "
        f"**{at_best} of {len(wide)}**; below: {below or 'none'}.",
        flat_beside(wide),
        dropins_beside(wide),
        f"- Decode (1-token) appends within {TARGET_FLOOR}x of Dawn's empty dispatch "
        f"({', '.join(f'{f:.2f}' for f in floors)} µs): **{within} of {len(decode)}** "
        f"({min((r['floor_x'] for r in decode), default=0):.2f}x-"
        f"{max((r['floor_x'] for r in decode), default=0):.2f}x).",
        *beside_floor(decode),
        f"- Dawn's time over wgpu-native's for the same row (the wgpu-native rows of this page): "
        f"geometric mean {_f(geomean(ratios), 2)}, "
        f"range {_f(min(ratios, default=None), 2)}-{_f(max(ratios, default=None), 2)}.",
        "",
        "| variant | B | tokens | Dawn µs | copy GB/s | % roof | % best | wgpu-native µs | "
        "Dawn / wgpu-native | × floor | run | note |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|",
    ]
    for r in dawn:
        status = r.get("kvdsl_status")
        native = r.get("native_run")
        note = "; ".join(
            part
            for part in (native and f"wgpu-native: {native}", status != "ok" and str(status))
            if part
        )
        out.append(
            f"| {r['variant']} | {_f(r.get('batch'), 0)} | {_f(r.get('tokens'), 0)} | "
            f"{_f(r.get('kvdsl_us'), 2)} | {_f(r.get('copy_gbps'), 0)} | "
            f"{_f(r.get('pct_roofline'), 0)} | {_f(r.get('pct_best'), 0)} | "
            f"{_f(r.get('native_us'), 2)} | {_f(r.get('over_native'), 2)} | "
            f"{_f(r.get('floor_x'), 2)} | {r.get('run', '')} | {note.replace('|', '/')} |"
        )
    return out + [""]


def compile_section(data: dict | None) -> list[str]:
    """The compiler-speed figures of ``compile.json``."""
    if not data:
        return ["Not measured in this run: `python benchmarks/compile.py`.", ""]
    out = [
        f"- kvdsl build + verify + emit of the whole catalog ({data['variants']} variants): "
        f"{data['kvdsl_s'] * 1e3:.1f} ms (first run {data['kvdsl_first_s'] * 1e3:.1f} ms)."
    ]
    if "jinja_s" in data:
        out += [
            f"- jinja2 compile of the template + {data['renders']} renders: "
            f"{data['jinja_s'] * 1e3:.1f} ms (first run {data['jinja_first_s'] * 1e3:.1f} ms).",
            f"- kvdsl / jinja2 = **{data['ratio']:.2f}** (target: below 1).",
        ]
    if data.get("note"):  # which reading this is, where compile.json was put together by hand
        out.append(f"- The reading: {data['note']}.")
    if data.get("interp"):
        out += ["", "| interpreter case | numpy ms | interpreter ms | interpreter / numpy |"]
        out += ["|---|--:|--:|--:|"]
        for r in data["interp"]:
            out.append(
                f"| {r['case']} | {r['numpy_s'] * 1e3:.1f} | {r['interp_s'] * 1e3:.1f} | "
                f"{r['ratio']:.1f}x |"
            )
    return out + [""]


def page(
    rows: list[dict],
    device: dict,
    comp: dict | None,
    png: str | None,
    note: str = "",
    command: str | None = None,
    dawn: list[dict] | None = None,
    dawn_toggled: list[str] | None = None,
) -> str:
    """The whole docs page; ``dawn_toggled``: the Dawn runs that ran with toggles turned on
    (:func:`toggled`)."""
    sizes = device.get("sizes", {})
    lim = device.get("requested_limits", {})
    lines = [
        "<!-- generated by `python benchmarks/report.py`: do not edit -->",
        "# Performance",
        "",
        "What kvdsl's kernels reach on a real GPU against a copy of the same bytes and the legacy "
        "template, and what its compiler takes against jinja2. Sections: *Device*, *At a glance* "
        "(the issue's targets, met or not), *Targets* (the rows behind each), *Chart*, *Compiler "
        "and interpreter*, *Method*"
        + (", *Dawn*" if dawn else "")
        + ", *Tables* (every row, by mode)"
        + (
            ", *Notes* (the runs, the probes, and why each row short of its target stays there)"
            if note.strip()
            else ""
        )
        + ".",
        "",
        "## Device",
        "",
        f"- {device.get('device')} ({device.get('vendor')}, {device.get('backend')}, "
        f"{device.get('adapter_type')}), driver {device.get('description')}",
        f"- empty dispatch (the floor): **{device.get('floor_us', 0):.2f} µs**",
        f"- storage-binding limit requested: {lim.get('max-storage-buffer-binding-size')} B, "
        f"buffer limit {lim.get('max-buffer-size')} B (WebGPU defaults 134217728 / 268435456; "
        f"raised only by the benchmark when its largest buffer, "
        f"{device.get('largest_buffer')} B, needs it)",
        f"- sizes: batch {batches(rows) or sizes.get('batches')}, {device.get('heads')} KV heads, head dim "
        f"{device.get('head_dim')}, cache {sizes.get('cache')} tokens, prefill appends "
        f"{sizes.get('prefill')} tokens, decode appends 1 token"
        + (" (**--small smoke run, not a measurement**)" if device.get("small") else ""),
        f"- best vec4 copy bandwidth of the runs (≥ 64 MB): **{_f(device.get('peak_copy_gbps'), 0)} "
        "GB/s**",
        "",
        "## At a glance",
        "",
        *glance(rows, comp),
        "",
        *(
            [
                "Why each row short of its target stays there, and what was tried: *Notes*, "
                "*What stays below target, and why*.",
                "",
            ]
            if "What stays below target" in note
            else []
        ),
        "## Targets",
        "",
        *summary(rows),
        "",
    ]
    if png:
        lines += ["## Chart", "", f"![% of roofline per variant]({png})", ""]
    lines += ["## Compiler and interpreter", "", *compile_section(comp)]
    lines += [
        "## Method",
        "",
        "Regenerate: on the GPU host `bash benchmarks/all.sh OUT --batches 4 --trials 3 "
        "--repeats 30` (verify on the GPU, under Dawn too where wgpudawn finds it; compiler timing; "
        "benchmark; or `kvdsl bench`), then "
        "here `python benchmarks/report.py --csv OUT/gpu.csv --note "
        "benchmarks/results/h200/NOTE.md`." + (f" This page: `{command}`." if command else ""),
        "",
        "Each catalog option set (mode, walk, region, rotary, K norm, bits, vec4, element types) "
        "runs once, reshaped to 8 KV heads × head dim 128. Times are GPU timestamps around each "
        "dispatch, many dispatches in one submission, median; the kernel and its copy are timed "
        "alternately `--trials` times, and a row beside a slow copy or short of its target is "
        "timed again (`--retry-slow`, `--retry-below`), each keeping its fastest time "
        "(`benchmarks/gpu.py`'s docstring, since run 52; runs 42-43 retried only rows beside a "
        "slow copy, keeping the attempt beside the fastest copy, and earlier runs none). *Bytes* "
        "are what the variant's "
        "interface must move: each input element read once, each output element written once "
        "(the counting rule per mode is in `benchmarks/plans.py`'s docstring). *% roof* is the "
        "time of a `vec4<f32>` copy moving the same bytes (half read, half written, through two "
        "buffer pairs as K and V move), measured "
        "in the same run (alternately with it), over the kernel's time; *copy GB/s* is that copy's "
        "bandwidth. *% best* divides by the higher of that copy and the best copy of the runs "
        "(`conservative` in `benchmarks/report.py`): on this shared GPU a copy measured slow "
        "must not flatter a kernel, so *% best* is the figure to trust, and it understates a "
        "kernel measured only while the GPU was slow. *template* is the legacy Jinja template "
        "rendered for the same variables and timed the same way with its own dispatch geometry; "
        "where its interface differs or it does not compile, the note says so. *× floor* is a "
        "1-token append's time over the empty dispatch timed at the run's start; since run 57 "
        "each decode row also times the empty dispatch beside it, alternately with the kernel "
        "and the copy (`floor_beside_x` in the CSV, counted under *Targets*).",
        "",
    ]
    if dawn:
        lines += [
            "## Dawn (Chrome's WebGPU) on the same GPU",
            "",
            "The same benchmark with `KVDSL_WEBGPU=dawn`: Dawn, the WebGPU implementation inside "
            "Chrome, compiles the same WGSL with Tint (robustness and workgroup zeroing on, as in "
            "a browser; timestamp quantisation off). The copy and the empty dispatch are timed "
            "under Dawn too; *% best* divides by the best copy of the Dawn run."
            + (
                " Runs with Dawn toggles turned on (`KVDSL_DAWN_ENABLE`), which Chrome leaves "
                f"off: {'; '.join(dawn_toggled)}."
                if dawn_toggled
                else ""
            ),
            "",
            *dawn_section(dawn, rows),
        ]
    lines += ["## Tables", "", *tables(rows)]
    if note.strip():
        lines += ["## Notes", "", note.strip(), ""]
    return "\n".join(lines).rstrip() + "\n"


def _rel(path: Path) -> str:
    """``path`` relative to the repository where it lies inside it."""
    try:
        return str(path.resolve().relative_to(REPO))
    except ValueError:
        return str(path)


def main(argv: list[str] | None = None) -> int:
    """Write the chart and the docs page."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--csv",
        action="append",
        help="gpu.csv of a run; repeat for several (which row wins: --pick)",
    )
    ap.add_argument(
        "--pick",
        choices=("first", "fastest-copy"),
        default="first",
        help="of the runs that measured a row, the first listed (default) or the one whose copy "
        "beside it ran fastest (runs of the same kernels only)",
    )
    ap.add_argument(
        "--changed",
        action="append",
        help="gpu.csv of a run of kernels changed since the --csv runs: the variants it measured "
        "take their rows from the --changed runs alone (picked among them as --pick says)",
    )
    ap.add_argument("--dawn-changed", action="append", help="the same for the --dawn runs")
    ap.add_argument(
        "--latest",
        action="append",
        help="gpu.csv of a run of the catalog's kernels as they were then: each row it measured "
        "is taken from it (the other runs keep the rows it did not measure); repeated, each in "
        "turn, so a later one wins",
    )
    ap.add_argument("--note", help="a markdown file: the page's last section, *Notes*")
    ap.add_argument(
        "--dawn",
        action="append",
        help="gpu.csv of a run under KVDSL_WEBGPU=dawn (its own section); repeat as --csv",
    )
    ap.add_argument("--docs", default=str(REPO / "docs"))
    args = ap.parse_args(argv)
    sources = [Path(p) for p in (args.csv or [str(HERE / "out" / "gpu.csv")])]
    main_given = [*sources, *map(Path, (args.changed or []) + (args.latest or []))]
    dawn_given = [Path(p) for p in (args.dawn or []) + (args.dawn_changed or [])]
    given = main_given + dawn_given
    for path in given + ([Path(args.note)] if args.note else []):
        if not path.is_file():
            ap.error(f"no such file {str(path)!r}")
    try:
        for path in given:
            check_run(path)
    except ValueError as e:
        ap.error(str(e))
    folder = next((p.parent for p in sources if (p.parent / "device.json").is_file()), None)
    if folder is None:
        ap.error(
            "--csv: no device.json beside any run (benchmarks/gpu.py writes one beside its "
            "gpu.csv; the page's device section reads it)"
        )
    try:
        check_implementations(main_given, folder / "device.json", dawn_given)
    except ValueError as e:
        ap.error(str(e))
    from kvdsl import catalog

    names = set(catalog.VARIANTS)
    changed = [Path(p) for p in args.changed or []]
    latest = [Path(p) for p in args.latest or []]
    rows, gone = current(runs(sources, changed, args.pick, latest), names)
    peak = conservative(rows)
    device = json.loads((folder / "device.json").read_text()) | {"peak_copy_gbps": peak}
    comp_path = folder / "compile.json"
    comp = json.loads(comp_path.read_text()) if comp_path.is_file() else None
    note = Path(args.note).read_text() if args.note else ""
    dawn, dawn_toggled = None, []
    if args.dawn:
        dawn_changed = [Path(p) for p in args.dawn_changed or []]
        dawn_rows = runs([Path(p) for p in args.dawn], dawn_changed, args.pick)
        dawn_toggled = [
            t for p in [*map(Path, args.dawn), *dawn_changed] if (t := toggled(p)) is not None
        ]
        dawn, dawn_gone = current(dawn_rows, names)
        gone = sorted(set(gone) | set(dawn_gone))
        conservative(dawn)
    if gone:
        note += (
            "\n\nRows the runs measured for variants no longer in the catalog are left out: "
            + ", ".join(f"`{n}`" for n in gone)
            + ".\n"
        )
    docs = Path(args.docs)
    docs.mkdir(parents=True, exist_ok=True)
    png = "performance.png" if chart(rows, docs / "performance.png") else None
    command = " ".join(
        ["python benchmarks/report.py"]
        + [f"--csv {_rel(p)}" for p in sources]
        + [f"--changed {_rel(p)}" for p in changed]
        + [f"--latest {_rel(p)}" for p in latest]
        + ([f"--pick {args.pick}"] if args.pick != "first" else [])
        + ([f"--note {_rel(Path(args.note))}"] if args.note else [])
        + [f"--dawn {_rel(Path(p))}" for p in args.dawn or []]
        + [f"--dawn-changed {_rel(Path(p))}" for p in args.dawn_changed or []]
    )
    (docs / "performance.md").write_text(
        page(rows, device, comp, png, note, command, dawn, dawn_toggled)
    )
    print(f"wrote {docs / 'performance.md'}" + (f" and {docs / png}" if png else " (no chart)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
