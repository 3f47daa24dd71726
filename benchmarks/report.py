"""Make ``docs/performance.md`` and ``docs/performance.png`` from one folder of benchmark results.

    python benchmarks/report.py [FOLDER] [--docs DIR]

``FOLDER`` (default ``benchmarks/results/h200``, the committed results) holds what
``bash benchmarks/all.sh FOLDER`` writes on a GPU host:

- ``gpu.csv`` and ``device.json``: ``benchmarks/gpu.py`` under wgpu-native;
- ``compile.json``: ``benchmarks/compile.py``;
- ``dawn/gpu.csv`` and ``dawn/device.json`` (optional): ``benchmarks/gpu.py`` under Dawn;
- ``dense/gpu.csv`` and ``dense/device.json`` (optional): ``benchmarks/gpu.py --variants
  dense_append`` (the dense formats' appends, against their own targets);
- ``paged/gpu.csv`` and ``paged/device.json`` (optional): ``benchmarks/gpu.py --variants
  paged_append`` (the paged appends beside the copy, the empty dispatch and the contiguous
  append of their format);
- ``qkv/gpu.csv`` and ``qkv/device.json`` (optional): ``benchmarks/gpu.py --variants qkv paged_qkv``
  (the fused QKV kernels beside the copy, the empty dispatch and their unfused chains);
- ``reasons.json`` (optional, written by hand): for each target not met, the measured reason,
  keyed by :data:`TARGETS`.

``--attention DIR`` (default ``benchmarks/results/attention``) holds what
``benchmarks/attention.py --out DIR`` writes (:mod:`benchmarks.report_attention`): decode
attention's section of ``docs/performance-caches.md``, with its own device line and targets.

The page states the device and date, the method, the targets met or not (each one not met with its
reason), the chart and one table per mode at the largest batch; the dense formats, the paged
appends and the fused QKV kernels have their tables on a second page,
``docs/performance-caches.md`` (:func:`caches_page`).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import report_attention
import report_rotation

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DEFAULT = HERE / "results" / "h200"
ATTENTION = HERE / "results" / "attention"
ROOFLINE, PER_ROW, FLOOR = 90.0, 3.0, 1.5
#: The dense formats' append target: % of the copy at the largest batch's prefill size.
DENSE = 85.0
#: The fused QKV kernel's targets: % of the copy at the largest batch's prefill size, and how
#: many times faster than its unfused chain at decode.
QKV, CHAIN = 85.0, 2.0
#: The modes with a target of their own, left out of the others (the fused QKV kernels move
#: several tensors and are held to their own copy, floor and chain).
OWN_TARGETS = ("qkv", "paged_qkv")
#: The modes the legacy template walks only per row (its per-row target is stated for them).
PER_ROW_MODES = ("build", "build_quant", "append_quant", "window_shift")
#: Columns every benchmark CSV has.
REQUIRED = ("variant", "batch", "tokens", "kvdsl_us")
#: The targets, by the key ``reasons.json`` uses, with the words the page gives them.
TARGETS = {
    "flat": f"Flat variants at ≥ {ROOFLINE:.0f}% of a vec4 copy of the same bytes timed beside them",
    "dropin": f"Drop-in variants at ≥ {ROOFLINE:.0f}% of the copy timed beside them",
    "template": "Every drop-in at least as fast as the template",
    "per_row": f"The modes the template walks only per row ≥ {PER_ROW:.0f}x faster",
    "decode": f"Decode (1-token) appends within {FLOOR}x of the empty dispatch",
    "compiler": "Whole-catalog build + verify + emit faster than jinja2's compile + render",
    "dense": f"Dense-format appends at ≥ {DENSE:.0f}% of the copy beside them (largest batch), "
    f"1-token appends within {FLOOR}x of the empty dispatch",
    "paged": f"Paged appends at ≥ {DENSE:.0f}% of the copy beside them (largest batch), "
    f"1-token appends within {FLOOR}x of the empty dispatch; against the contiguous append of "
    "their format",
    "qkv": f"The fused QKV kernels at ≥ {QKV:.0f}% of the copy beside them (largest batch), "
    f"1-token decode within {FLOOR}x of the empty dispatch, ≥ {CHAIN:.0f}x faster than their "
    "unfused chain at decode",
    "rotation": report_rotation.TARGET,
}


@dataclass(frozen=True, slots=True)
class Results:
    """One folder of results, read."""

    rows: list[dict[str, Any]]
    device: dict[str, Any]
    compile: dict[str, Any] | None
    dawn: list[dict[str, Any]]
    dawn_device: dict[str, Any] | None
    reasons: dict[str, str]
    dense: list[dict[str, Any]] = field(default_factory=list)
    dense_device: dict[str, Any] | None = None
    qkv: list[dict[str, Any]] = field(default_factory=list)
    qkv_device: dict[str, Any] | None = None
    paged: list[dict[str, Any]] = field(default_factory=list)
    paged_device: dict[str, Any] | None = None
    rotation: list[dict[str, Any]] = field(default_factory=list)
    rotation_device: dict[str, Any] | None = None


def load(path: Path) -> list[dict[str, Any]]:
    """The CSV's rows with numbers parsed (empty cells are None); a ValueError naming the file
    for one that is not a benchmark CSV."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in REQUIRED if c not in (reader.fieldnames or ())]
        if missing:
            raise ValueError(f"{path}: not a gpu.csv of benchmarks/gpu.py (no {missing[0]!r})")
        return [{k: _number(v) for k, v in r.items()} for r in reader]


def _number(v: str | None) -> Any:
    if v in ("", None):
        return None
    try:
        return float(v)
    except ValueError:
        return v


def read(folder: Path) -> Results:
    """The results in ``folder``; a ValueError naming what is missing or wrong."""

    def need(name: str) -> Path:
        if not (folder / name).is_file():
            raise ValueError(f"{folder}: no {name} (benchmarks/all.sh writes it)")
        return folder / name

    def optional(name: str) -> Any:
        path = folder / name
        return json.loads(path.read_text()) if path.is_file() else None

    rows = load(need("gpu.csv"))
    device = json.loads(need("device.json").read_text())
    dawn, dawn_device = [], optional("dawn/device.json")
    if (folder / "dawn" / "gpu.csv").is_file():
        dawn = load(folder / "dawn" / "gpu.csv")
        if (dawn_device or {}).get("implementation") != "dawn":
            raise ValueError(f"{folder / 'dawn'}: device.json does not say the run was under Dawn")
    reasons = optional("reasons.json") or {}
    unknown = sorted(set(reasons) - set(TARGETS))
    if unknown:
        raise ValueError(f"{folder / 'reasons.json'}: no target {unknown[0]!r}")
    dense = load(folder / "dense" / "gpu.csv") if (folder / "dense" / "gpu.csv").is_file() else []
    dense_device = optional("dense/device.json") if dense else None
    qkv = load(folder / "qkv" / "gpu.csv") if (folder / "qkv" / "gpu.csv").is_file() else []
    qkv_device = optional("qkv/device.json") if qkv else None
    paged = load(folder / "paged" / "gpu.csv") if (folder / "paged" / "gpu.csv").is_file() else []
    paged_device = optional("paged/device.json") if paged else None
    turned = folder / "rotation" / "gpu.csv"
    rotation = load(turned) if turned.is_file() else []
    rotation_device = optional("rotation/device.json") if rotation else None
    return Results(
        rows, device, optional("compile.json"), dawn, dawn_device, reasons, dense, dense_device,
        qkv, qkv_device, paged, paged_device, rotation, rotation_device,
    )  # fmt: skip


# -- what the rows say ---------------------------------------------------------------------------


def largest(rows: list[dict]) -> list[dict]:
    """The rows at the largest batch (the targets are stated there)."""
    top = max((r["batch"] for r in rows if r.get("batch")), default=None)
    return [r for r in rows if r.get("batch") == top]


def is_flat(row: dict) -> bool:
    """Whether the row is a flat variant (kvdsl's fastest walk) rather than a drop-in."""
    return "flat" in row["variant"]


def walk_of(row: dict) -> str:
    """The row's walk from its options (``transpose`` has none: one invocation per element)."""
    for part in str(row.get("options") or "").split():
        if part.startswith("walk="):
            return part[len("walk=") :]
    return "element"


def floor_x(row: dict) -> float | None:
    """A decode row's time over the empty dispatch timed beside it (at the run's start where the
    run timed none beside it)."""
    return row.get("floor_beside_x") or row.get("floor_x")


def wide(rows: list[dict]) -> list[dict]:
    """The measured rows that are not decode appends (their target is the copy)."""
    return [r for r in rows if r.get("pct_roofline") and not r.get("decode")]


def per_row_ratios(rows: list[dict]) -> dict[str, float]:
    """For each mode the template walks only per row, the least over its sizes of the fastest
    template render's time over kvdsl's fastest variant's."""
    out = {}
    for mode in PER_ROW_MODES:
        ratios = []
        m = [r for r in rows if r.get("mode") == mode and r.get("kvdsl_us")]
        for tok in {r["tokens"] for r in m}:
            at = [r for r in m if r["tokens"] == tok]
            tmpl = [r["template_us"] for r in at if r.get("template_us")]
            if tmpl:
                ratios.append(min(tmpl) / min(r["kvdsl_us"] for r in at))
        if ratios:
            out[mode] = min(ratios)
    return out


def _pct_line(rows: list[dict], target: float = ROOFLINE) -> tuple[int, str]:
    """How many ``rows`` reach ``target`` % of the copy, and the rows below named."""
    below = sorted((r for r in rows if r["pct_roofline"] < target), key=lambda r: r["pct_roofline"])
    names = ", ".join(
        f"{r['variant']} {int(r['tokens']):,} tok {r['pct_roofline']:.1f}%" for r in below
    )
    return len(rows) - len(below), names


def targets(res: Results) -> list[tuple[str, str, bool]]:
    """Each target's key, its figure on this page, and whether it is met."""
    rows = [r for r in res.rows if r.get("mode") not in OWN_TARGETS]
    b = largest(rows)
    batch = int(b[0]["batch"]) if b else 0
    timed = wide(b)
    flat = [r for r in timed if is_flat(r)]
    drop = [r for r in timed if not is_flat(r) and r["mode"] != "transpose"]
    own = [r for r in timed if not is_flat(r) and r["mode"] == "transpose"]
    out = []
    n, below = _pct_line(flat)
    out.append(
        (
            "flat",
            f"batch {batch}: {n} of {len(flat)}" + (f" (below: {below})" if below else ""),
            n == len(flat),
        )
    )
    n, _ = _pct_line(drop)
    pcts = [r["pct_roofline"] for r in drop]
    out.append(
        (
            "dropin",
            f"batch {batch}: {n} of {len(drop)} ({min(pcts, default=0):.0f}-{max(pcts, default=0):.0f}%; "
            f"the {len(own)} drop-in transpose rows, the template's own kernel, apart)",
            n == len(drop),
        )
    )
    pair = [
        r for r in b if r.get("template_over_kvdsl") and not is_flat(r) and r["mode"] != "transpose"
    ]
    ge = sum(r["template_over_kvdsl"] >= 1.0 for r in pair)
    out.append(
        (
            "template",
            f"batch {batch}: {ge} of {len(pair)} at ≥ 1.00x the template's speed",
            ge == len(pair),
        )
    )
    ratios = per_row_ratios(b)
    if ratios:
        out.append(
            (
                "per_row",
                ", ".join(f"{m} ≥ {x:.1f}x" for m, x in ratios.items()),
                min(ratios.values()) >= PER_ROW,
            )
        )
    dec = [r for r in rows if r.get("decode") and floor_x(r)]
    parts, met = [], True
    for label, flat_ in (("flat", True), ("drop-ins", False)):
        for bt in sorted({r["batch"] for r in dec}, reverse=True):
            xs = [floor_x(r) for r in dec if is_flat(r) == flat_ and r["batch"] == bt]
            if xs:
                ok = sum(x <= FLOOR for x in xs)
                met &= ok == len(xs)
                parts.append(
                    f"{label} at batch {int(bt)} {ok} of {len(xs)} ({min(xs):.2f}-{max(xs):.2f}x)"
                )
    if parts:
        out.append(("decode", "; ".join(parts), met))
    if res.dense:
        out.append(dense_target(res.dense))
    if res.paged:
        out.append(paged_target(res.paged))
    if res.qkv:
        out.append(qkv_target(res.qkv))
    comp = res.compile or {}
    if "jinja_s" in comp:
        out.append(
            (
                "compiler",
                f"{comp['kvdsl_s'] * 1e3:.1f} ms against {comp['jinja_s'] * 1e3:.1f} ms "
                f"({comp['ratio']:.2f}x; {comp['variants']} variants"
                + (f"; {comp['note']}" if comp.get("note") else "")
                + ")",
                comp["ratio"] < 1,
            )
        )
    return out


def dense_target(rows: list[dict], key: str = "dense") -> tuple[str, str, bool]:
    """The dense appends' target (or the paged appends', ``key``): each prefill row at the
    largest batch against the copy, each decode row against the empty dispatch."""
    b = largest(rows)
    batch = int(b[0]["batch"]) if b else 0
    timed = wide(b)
    n, _ = _pct_line(timed, DENSE)
    pcts = [r["pct_roofline"] for r in timed]
    dec = [floor_x(r) for r in rows if r.get("decode") and floor_x(r)]
    ok = sum(x <= FLOOR for x in dec)
    figure = (
        f"batch {batch}: {n} of {len(timed)} ({min(pcts, default=0):.0f}-"
        f"{max(pcts, default=0):.0f}%); decode {ok} of {len(dec)} "
        f"({min(dec, default=0):.2f}-{max(dec, default=0):.2f}x)"
    )
    return key, figure, n == len(timed) and ok == len(dec)


def paged_target(rows: list[dict]) -> tuple[str, str, bool]:
    """The paged appends' target: :func:`dense_target`'s, and the range of their times over
    the contiguous append's timed beside them (a figure, not a target)."""
    key, figure, met = dense_target(rows, "paged")
    xs = [r["kvdsl_over_contiguous"] for r in rows if r.get("kvdsl_over_contiguous")]
    if xs:
        figure += f"; time over the contiguous append {min(xs):.2f}-{max(xs):.2f}x"
    return key, figure, met


def qkv_target(rows: list[dict]) -> tuple[str, str, bool]:
    """The fused QKV kernels' target: each prefill row at the largest batch against the copy,
    each decode row against the empty dispatch and against its unfused chain."""
    b = largest(rows)
    batch = int(b[0]["batch"]) if b else 0
    timed = wide(b)
    n, _ = _pct_line(timed, QKV)
    pcts = [r["pct_roofline"] for r in timed]
    dec = [r for r in rows if r.get("decode") and floor_x(r)]
    xs = [floor_x(r) for r in dec]
    ok = sum(x <= FLOOR for x in xs)
    chains = [r["chain_x"] for r in dec if r.get("chain_x")]
    fast = sum(x >= CHAIN for x in chains)
    figure = (
        f"batch {batch}: {n} of {len(timed)} ({min(pcts, default=0):.0f}-"
        f"{max(pcts, default=0):.0f}%); decode {ok} of {len(xs)} "
        f"({min(xs, default=0):.2f}-{max(xs, default=0):.2f}x); against the chain at decode "
        f"{fast} of {len(chains)} ({min(chains, default=0):.2f}-{max(chains, default=0):.2f}x)"
    )
    met = n == len(timed) and ok == len(xs) and fast == len(chains) == len(xs)
    return "qkv", figure, met


# -- the page ------------------------------------------------------------------------------------


def _cell(row: dict | None, what: str) -> str:
    """One table cell: a decode row's × the empty dispatch, another row's % of the copy, or the
    template's time over kvdsl's."""
    if row is None:
        return ""
    if what == "template":
        x = row.get("template_over_kvdsl")
        return f"{x:.2f}x" if x else "–"
    if row.get("decode"):
        x = floor_x(row)
        return f"{x:.2f}x floor" if x else "–"
    x = row.get("pct_roofline")
    return f"{x:.0f}%" if x else str(row.get("kvdsl_status") or "–")


def tables(rows: list[dict], dawn: list[dict]) -> list[str]:
    """One markdown table per mode at the largest batch: per size kvdsl against the copy (or the
    empty dispatch), the template's time over kvdsl's and the same row under Dawn."""
    b = largest(rows)
    at = {(r["variant"], r["tokens"]): r for r in b}
    under_dawn = {(r["variant"], r["tokens"]): r for r in largest(dawn)}
    out = []
    for mode in dict.fromkeys(r["mode"] for r in b):
        m = [r for r in b if r["mode"] == mode]
        sizes = sorted({r["tokens"] for r in m})
        head = ["variant", "walk"]
        for tok in sizes:
            head += [f"{int(tok):,} tok", "template"] + (["Dawn"] if dawn else [])
        out += [f"### {mode}", "", "| " + " | ".join(head) + " |"]
        out.append("|---|---|" + "--:|" * (len(head) - 2))
        first = {}
        for r in m:
            first.setdefault(r["variant"], r)
        for name, row in first.items():
            cells = [name, walk_of(row)]
            for tok in sizes:
                row = at.get((name, tok))
                cells += [_cell(row, "kvdsl"), _cell(row, "template")]
                if dawn:
                    cells.append(_cell(under_dawn.get((name, tok)), "kvdsl") if row else "")
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    return out


def chart(rows: list[dict], path: Path) -> None:
    """Horizontal bars of % of the copy timed beside each row, kvdsl beside the template (the
    largest batch, decode appends left out: their measure is the empty dispatch)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = wide(largest(rows))
    labels = [f"{r['variant']} ({int(r['tokens'])} tok)" for r in rows]
    kv = [r["pct_roofline"] for r in rows]
    tp = [r.get("template_pct_roofline") or 0 for r in rows]
    fig, ax = plt.subplots(figsize=(10, 0.22 * len(rows) + 1.5))
    y = range(len(rows))
    ax.barh([i - 0.2 for i in y], kv, 0.4, label="kvdsl", color="#2b6cb0")
    ax.barh([i + 0.2 for i in y], tp, 0.4, label="template", color="#dd6b20")
    ax.axvline(ROOFLINE, color="k", ls="--", lw=0.8, label=f"{ROOFLINE:.0f}% target")
    ax.set_xlim(0, min(200, max([110, *kv, *tp])))
    ax.set_yticks(list(y), labels, fontsize=6)
    ax.invert_yaxis()
    ax.set_xlabel("% of a vec4 copy of the same bytes timed beside it")
    batch = int(rows[0]["batch"]) if rows else 0
    ax.set_title(f"Batch {batch}: bandwidth as % of a vec4 copy moving the same bytes")
    ax.legend(loc="lower right", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120, metadata={"Software": None})
    plt.close(fig)


def _device_line(device: dict) -> str:
    return (
        f"{device.get('device')} ({device.get('backend')}, driver {device.get('description')}) "
        f"under {device.get('implementation')}"
    )


def page(res: Results, command: str) -> str:
    """The whole docs page."""
    dev, sizes = res.device, res.device.get("sizes", {})
    batches = sorted({int(r["batch"]) for r in res.rows if r.get("batch")})
    found = targets(res)
    lines = [
        f"<!-- generated by `{command}`: do not edit -->",
        "# Performance",
        "",
        "What kvdsl's kernels reach on a GPU against a copy of the same bytes and the legacy "
        "template, and what its compiler takes against jinja2.",
        "",
        "## Device",
        "",
        f"- {_device_line(dev)}, measured {dev.get('date', 'on an unrecorded date')}.",
    ]
    if res.dawn_device:
        lines.append(
            f"- The *Dawn* columns: {_device_line(res.dawn_device)} (Chrome's WebGPU: Tint, "
            f"robustness on), measured {res.dawn_device.get('date', 'on an unrecorded date')}."
        )
    lines += [
        f"- Empty dispatch (the floor): {dev.get('floor_us', 0):.2f} µs. Sizes: batch "
        f"{', '.join(map(str, batches))}, {dev.get('heads')} KV heads × head dim "
        f"{dev.get('head_dim')}, a cache of {sizes.get('cache'):,} tokens, prefill appends of "
        f"{sizes.get('prefill'):,} tokens, decode appends of 1 token.",
        "",
        "## Method",
        "",
        "`bash benchmarks/all.sh OUT --batches 4 --trials 3 --repeats 30` on the GPU host, then "
        "`python benchmarks/report.py OUT`. Each catalog option set runs once, reshaped to the "
        "sizes above. Times are GPU timestamps around many dispatches in one submission, median. "
        "Each kernel is timed alternately with a `vec4<f32>` copy moving the same bytes (half "
        "read, half written); a row beside a slow copy, or short of its target, is timed again, "
        "and each side keeps its fastest time (`benchmarks/gpu.py`). A row's bytes are what its "
        "interface must move: each input read once, each output written once "
        "(`benchmarks/plans.py`). *N%* is the copy's time over the kernel's; *N× floor* is a "
        "decode append's time over the empty dispatch timed beside it; *template* is the legacy "
        "template's time over kvdsl's for the same variables, with its own dispatch geometry "
        "(– where its interface differs)."
        + (
            f" Under Dawn the {len(res.dawn_device.get('toggled_variants', []))} f16 variants "
            f"ran with {', '.join(res.dawn_device['dawn_toggles']['enable'])} on, which Chrome "
            "leaves off."
            if res.dawn_device and (res.dawn_device.get("dawn_toggles") or {}).get("enable")
            else ""
        ),
        "",
        "## Targets",
        "",
        "| target | measured | |",
        "|---|---|---|",
        *(
            f"| {TARGETS[k]} | {figure} | {'met' if ok else '**not met**'} |"
            for k, figure, ok in found
        ),
        "",
    ]
    missed = [(k, figure) for k, figure, ok in found if not ok]
    if missed:
        lines += ["Not met, and why:", ""]
        lines += [f"- {TARGETS[k]}: {res.reasons.get(k, 'no reason recorded')}" for k, _ in missed]
        lines.append("")
    lines += ["## Chart", "", "![% of the copy per variant](performance.png)", ""]
    lines += [
        f"## Tables (batch {batches[-1] if batches else '–'})",
        "",
        *tables(res.rows, res.dawn),
    ]
    if res.dense or res.paged or res.qkv:
        lines += [
            "Dense formats, paged appends and the fused QKV kernels: their tables are on "
            "[performance-caches.md](performance-caches.md).",
            "",
        ]
    return "\n".join(lines).rstrip() + "\n"


def caches_page(res: Results, command: str, attention: dict | None = None) -> str:
    """``docs/performance-caches.md``: the tables of the dense formats, the paged appends and
    the fused QKV kernels (their targets are on the main page), and decode attention's section
    with its targets (:mod:`benchmarks.report_attention`)."""
    lines = [
        "# Performance: dense formats, paged caches, fused QKV, decode attention",
        "",
        f"Generated by `{command}`; the method, the targets and their figures are on "
        "[performance.md](performance.md).",
        "",
    ]
    if res.dense:
        dev = res.dense_device or {}
        top = max(int(r["batch"]) for r in res.dense if r.get("batch"))
        lines += [
            f"## Dense formats (batch {top}; `docs/formats.md`)",
            f"{_device_line(dev)}, measured {dev.get('date', 'on an unrecorded date')}, by the "
            "same method; the template has no such mode.",
            *tables(res.dense, [])[1:],
        ]
    if res.paged:
        dev = res.paged_device or {}
        top = max(int(r["batch"]) for r in res.paged if r.get("batch"))
        lines += [
            f"## Paged appends (batch {top}; `docs/modes.md`)",
            f"{_device_line(dev)}, measured {dev.get('date', 'on an unrecorded date')}, by the "
            "same method; *contiguous* is the paged append's time over the contiguous append of "
            "its format timed beside it (`benchmarks/plans.py`).",
            *tables(res.paged, [])[1:],
            "| variant | tokens | contiguous append | paged / contiguous |",
            "|---|---|---|---|",
            *(
                f"| {r['variant']} | {int(r['tokens']):,} | {r['contiguous']} | "
                f"{r['kvdsl_over_contiguous']:.2f}x |"
                for r in largest(res.paged)
                if r.get("kvdsl_over_contiguous")
            ),
            "",
        ]
    if res.qkv:
        dev = res.qkv_device or {}
        top = max(int(r["batch"]) for r in res.qkv if r.get("batch"))
        lines += [
            f"## Fused QKV (batch {top}; `docs/modes.md`)",
            f"{_device_line(dev)}, measured {dev.get('date', 'on an unrecorded date')}, by the "
            "same method, each variant at its own model's heads; *chain* is the sum of its "
            "unfused chain's kernel times over the fused kernel's (`benchmarks/plans.py`).",
            *tables(res.qkv, [])[1:],
            "| variant | batch | tokens | fused µs | chain µs | chain |",
            "|---|---|---|---|---|---|",
            *(
                f"| {r['variant']} | {int(r['batch'])} | {int(r['tokens']):,} | "
                f"{r['kvdsl_us']:.2f} | {r['chain_us']:.2f} | {r['chain_x']:.2f}x |"
                for r in res.qkv
                if r.get("chain_x") and r.get("decode")
            ),
            "",
        ]
    if res.rotation:
        dev = res.rotation_device or {}
        when = f"{_device_line(dev)}, measured {dev.get('date', 'on an unrecorded date')}"
        lines += report_rotation.section(res.rotation, when, res.reasons.get("rotation"))
    if attention:
        lines += report_attention.section(attention)
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
    ap.add_argument("folder", nargs="?", default=str(DEFAULT), help="results folder (%(default)s)")
    ap.add_argument("--docs", default=str(REPO / "docs"), help="where to write the page and chart")
    ap.add_argument(
        "--attention", default=str(ATTENTION), help="decode attention's results (%(default)s)"
    )
    args = ap.parse_args(argv)
    folder = Path(args.folder)
    try:
        res = read(folder)
        attention = report_attention.read(Path(args.attention))
    except (OSError, ValueError) as e:
        ap.error(str(e))
    try:
        import matplotlib  # noqa: F401  (the chart's; the bench extra)
    except ImportError:
        ap.error("the chart needs matplotlib: pip install 'kvdsl[bench]'")
    command = "python benchmarks/report.py" + (
        "" if folder.resolve() == DEFAULT else f" {_rel(folder)}"
    )
    docs = Path(args.docs)
    docs.mkdir(parents=True, exist_ok=True)
    chart(res.rows, docs / "performance.png")
    (docs / "performance.md").write_text(page(res, command))
    (docs / "performance-caches.md").write_text(caches_page(res, command, attention))
    print(f"wrote {docs / 'performance.md'}, performance-caches.md and {docs / 'performance.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
