"""The rotated writers' part of ``docs/performance-caches.md``: each catalog writer that rotates
K (``..._rotation128_...``) beside its unrotated twin, both timed by ``benchmarks/gpu.py`` in
one run into ``rotation/gpu.csv`` of the results folder."""

from __future__ import annotations

import re
from typing import Any

#: A rotated writer against its unrotated twin, at the prefill sizes (a decode append of one
#: token is the dispatch floor: its 10% is below the run's noise).
ROTATED = 1.10
TARGET = (
    f"Writers rotating K (appends, builds, the fused QKV kernel) within {ROTATED - 1:.0%} of the "
    "same kernels unrotated (prefill sizes)"
)


def pairs(rows: list[dict[str, Any]]) -> list[tuple[dict, dict]]:
    """(unrotated row, rotated row) at each batch and token count both were timed at."""
    at = {(r["variant"], int(r["batch"]), int(r["tokens"])): r for r in rows if r.get("kvdsl_us")}
    out = []
    for (name, batch, tokens), row in at.items():
        twin = re.sub(r"_rotation\d+", "", name)
        if twin != name and (twin, batch, tokens) in at:
            out.append((at[twin, batch, tokens], row))
    return out


def target(rows: list[dict[str, Any]]) -> tuple[str, bool] | None:
    """The worst prefill ratio of a rotated writer to its twin, and whether it is met."""
    ratios = [r["kvdsl_us"] / p["kvdsl_us"] for p, r in pairs(rows) if not r.get("decode")]
    if not ratios:
        return None
    worst = max(ratios)
    return f"at most {worst - 1:+.0%}", worst <= ROTATED


def section(rows: list[dict[str, Any]], device_line: str, reason: str | None) -> list[str]:
    """The section: its target and every pair."""
    if not pairs(rows):
        return []
    figure = target(rows)
    lines = [
        "## Rotated writers (`rotation`; `docs/formats-quality.md`)",
        "",
        f"{device_line}, by the method above: each writer rotating K over the whole head (128) "
        "beside its unrotated twin, both timed in one run of `benchmarks/gpu.py`.",
        "",
    ]
    if figure:
        met = "met" if figure[1] else "**not met**"
        lines += ["| target | measured | |", "|---|---|---|", f"| {TARGET} | {figure[0]} | {met} |"]
        lines.append("")
        if not figure[1]:
            lines += ["Not met, and why:", "", f"- {TARGET}: {reason or 'no reason recorded'}", ""]
    lines += [
        "| writer | batch | tokens | unrotated µs | rotated µs | ratio |",
        "|---|---|---|---|---|---|",
        *(
            f"| {p['variant']} | {int(r['batch'])} | {int(r['tokens']):,} | "
            f"{p['kvdsl_us']:.2f} | {r['kvdsl_us']:.2f} | {r['kvdsl_us'] / p['kvdsl_us']:.2f} |"
            for p, r in sorted(
                pairs(rows), key=lambda pr: (pr[0]["variant"], pr[0]["batch"], pr[0]["tokens"])
            )
        ),
        "",
    ]
    return lines
