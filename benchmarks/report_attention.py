"""The decode-attention part of the performance pages, from what ``benchmarks/attention.py``
writes: ``attention.json`` (the device and one row per measurement) and, optional, written by
hand, ``reasons.json`` (for each target not met, the measured limit, keyed by
:data:`TARGETS`), both in one folder (default ``benchmarks/results/attention``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: The cache bytes read against a copy of them, for these formats at every measured size.
OF_COPY, OF_COPY_FORMATS = 0.80, ("f16", "int8", "int4")
#: 512 tokens at batch 1 against the empty dispatch; the 4-bit chains against attend; the
#: planned chunk count against the best candidate timed beside it.
FLOOR, CHAIN, PLAN = 2.0, 2.0, 1.10
#: Attention over a rotated cache against the same cache unrotated.
ROTATED = 1.10

TARGETS = {
    "attention": f"Decode attention reads its cache at ≥ {OF_COPY:.0%} of a copy of the same bytes "
    f"({', '.join(OF_COPY_FORMATS)}; 8,192 and 32,768 tokens, batch 1 and 4)",
    "attention_floor": f"Decode attention over 512 tokens, batch 1, within {FLOOR:.0f}x of the "
    "empty dispatch",
    "attention_chain": f"Attention over a 4-bit cache ≥ {CHAIN:.0f}x faster than dense_read into "
    "f32 then attention (8,192 tokens, batch 4)",
    "attention_plan": f"The planned chunk count within {PLAN - 1:.0%} of the best candidate",
    "attention_rotation": f"Attention over a rotated cache within {ROTATED - 1:.0%} of the same "
    "cache unrotated",
}


def read(folder: Path) -> dict[str, Any] | None:
    """``attention.json`` and ``reasons.json`` of ``folder`` (None where there is no run)."""
    path = folder / "attention.json"
    if not path.is_file():
        return None
    att = json.loads(path.read_text())
    reasons = folder / "reasons.json"
    att["reasons"] = json.loads(reasons.read_text()) if reasons.is_file() else {}
    unknown = sorted(set(att["reasons"]) - set(TARGETS))
    if unknown:
        raise ValueError(f"{reasons}: no target {unknown[0]!r}")
    return att


def _kind(att: dict, kind: str) -> list[dict]:
    return [r for r in att["rows"] if r["kind"] == kind]


def _sizes(att: dict) -> list[tuple[str, int, int]]:
    seen = []
    for r in _kind(att, "bandwidth"):
        key = (r["format"], r["batch"], r["tokens"])
        if key not in seen:
            seen.append(key)
    return seen


def total(row: dict) -> float:
    """A candidate's time: attend and its merge."""
    return row["us"] + row["merge_us"]


def planned_chunk(fmt: str, batch: int, tokens: int) -> int:
    """The chunk :func:`kvdsl.kernels.attend.plan` picks now at the benchmark's shape."""
    from attention import config

    from kvdsl.kernels.attend import plan

    return plan(config(fmt), batch=batch, queries=1, longest=tokens)["chunk"]


def _planned(att: dict, key: tuple) -> tuple[dict, dict]:
    """The row of one size at the chunk the plan picks, and the fastest candidate (attend and
    its merge)."""
    rows = [r for r in _kind(att, "bandwidth") if (r["format"], r["batch"], r["tokens"]) == key]
    chunk = planned_chunk(*key)
    mine = [r for r in rows if r["chunk"] == chunk]
    if not mine:
        raise ValueError(
            f"{key[0]}, batch {key[1]}, {key[2]} tokens: the plan's chunk {chunk} was not timed: "
            "rerun benchmarks/attention.py"
        )
    return mine[0], min(rows, key=total)


def targets(att: dict) -> list[tuple[str, str, bool]]:
    """(target key, the figure, met) for each target the run measured."""
    out = []
    planned = {key: _planned(att, key) for key in _sizes(att)}
    shares = {k: p["of_copy"] for k, (p, _) in planned.items() if k[0] in OF_COPY_FORMATS}
    if shares:
        low = min(shares, key=shares.get)
        out.append(
            (
                "attention",
                f"{min(shares.values()):.0%} to {max(shares.values()):.0%} "
                f"(lowest: {low[0]}, batch {low[1]}, {low[2]:,} tokens)",
                min(shares.values()) >= OF_COPY,
            )
        )
    for r in _kind(att, "latency"):
        x = r["us"] / r["empty_us"]
        out.append(("attention_floor", f"{x:.2f}x ({r['us']:.1f} µs)", x <= FLOOR))
    chains = _kind(att, "chain")
    if chains:
        xs = {r["format"]: r["chain_us"] / r["us"] for r in chains}
        figure = ", ".join(f"{f} {x:.2f}x" for f, x in xs.items())
        out.append(("attention_chain", figure, min(xs.values()) >= CHAIN))
    if planned:
        slow = max(total(p) / total(best) for p, best in planned.values())
        out.append(("attention_plan", f"at most {slow - 1:.0%} slower", slow <= PLAN))
    turned = _kind(att, "rotation")
    if turned:
        worst = max(r["us"] / r["plain_us"] for r in turned)
        out.append(("attention_rotation", f"at most {worst - 1:+.0%}", worst <= ROTATED))
    return out


def _gbps(row: dict) -> str:
    """`` (GB/s)`` of the copy beside a row, where the run recorded it."""
    return f" ({row['copy_gbps']:,.0f})" if "copy_gbps" in row else ""


def section(att: dict) -> list[str]:
    """The decode-attention section of ``docs/performance-caches.md``."""
    dev = att["device"]
    lines = [
        "## Decode attention (`attend`; `benchmarks/attention.py`)",
        "",
        f"{dev.get('device', 'an unrecorded device')} ({dev.get('backend', '')} "
        f"{dev.get('implementation', '')}), {att['trials']} trials of {att['repeats']} "
        "dispatches, median. 8 KV heads × 128, 32 query heads, one new token, a contiguous BNSH "
        "cache; each time is attend plus its merge (the second dispatch, where there are several "
        "chunks), beside a `vec4<f32>` copy of exactly the cache bytes it reads, timed "
        "alternately. *planned* is the chunk size `kvdsl.kernels.attend.plan` picks (the plan as it "
        "is now, among the candidates timed); *best* the fastest candidate, attend and merge, "
        "timed beside it (every chunk size from the workgroup size, doubling, "
        "to the most a workgroup holds).",
        "",
        "| target | measured | |",
        "|---|---|---|",
        *(
            f"| {TARGETS[k]} | {figure} | {'met' if ok else '**not met**'} |"
            for k, figure, ok in targets(att)
        ),
        "",
    ]
    missed = [k for k, _, ok in targets(att) if not ok]
    if missed:
        lines += ["Not met, and why:", ""]
        lines += [f"- {TARGETS[k]}: {att['reasons'].get(k, 'no reason recorded')}" for k in missed]
        lines.append("")
    lines += [
        "| cache | batch | tokens | planned chunk (chunks) | µs (merge) | copy µs (GB/s) "
        "| of copy | best chunk | best µs (merge) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for key in _sizes(att):
        p, best = _planned(att, key)
        lines.append(
            f"| {key[0]} | {key[1]} | {key[2]:,} | {p['chunk']} ({p['chunks']}) | "
            f"{p['us']:.1f} ({p['merge_us']:.1f}) | {p['copy_us']:.1f}{_gbps(p)} | "
            f"{p['of_copy']:.0%} | "
            f"{best['chunk']} | {best['us']:.1f} ({best['merge_us']:.1f}) |"
        )
    lines.append("")
    for r in _kind(att, "latency"):
        lines += [
            f"512 tokens, batch 1 ({r['format']}): {r['us']:.1f} µs, the empty dispatch "
            f"{r['empty_us']:.2f} µs.",
            "",
        ]
    paged = _kind(att, "paged")
    if paged:
        lines += [
            "| paged NHD cache | batch | tokens | µs | contiguous µs |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {r['format']} | {r['batch']} | {r['tokens']:,} | {r['us']:.1f} | "
            f"{r['contiguous_us']:.1f} |"
            for r in paged
        ]
        lines.append("")
    chains = _kind(att, "chain")
    if chains:
        lines += [
            "| 4-bit cache | attend µs | dense_read + attend over f32 µs | chain |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| {r['format']} | {r['us']:.1f} | {r['chain_us']:.1f} | "
            f"{r['chain_us'] / r['us']:.2f}x |"
            for r in chains
        ]
        lines.append("")
    turned = _kind(att, "rotation")
    if turned:
        lines += [
            "| rotated cache (blocks of the head) | batch | tokens | µs | unrotated µs | ratio |",
            "|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {r['format']} | {r['batch']} | {r['tokens']:,} | {r['us']:.1f} | "
            f"{r['plain_us']:.1f} | {r['us'] / r['plain_us']:.2f} |"
            for r in turned
        ]
        lines.append("")
    return lines
