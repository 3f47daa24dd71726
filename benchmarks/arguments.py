"""The GPU benchmark's options (``benchmarks/gpu.py``), built from the command line's argparse
types, and the one error that means bad input."""

from __future__ import annotations

import argparse

from kvdsl.cli.inputs import UsageError
from kvdsl.cli.options import percent, repeats, seconds, whole

__all__ = ["UsageError", "bench_options", "whole"]


def bench_options(p: argparse.ArgumentParser, out: str) -> argparse.ArgumentParser:
    """The GPU benchmark's options."""
    p.add_argument("--small", action="store_true", help="tiny sizes (llvmpipe smoke run)")
    p.add_argument("--out", default=out, help="folder for gpu.csv and device.json")
    p.add_argument("--variants", nargs="*", metavar="NAME", help="variant or mode names")
    p.add_argument("--batches", type=whole(1), nargs="*", help="batch sizes (default 1 and 4)")
    p.add_argument("--trials", type=whole(1), default=2, help="alternating timings, best kept (2)")
    p.add_argument("--repeats", type=repeats, help="timed dispatches (default 100; --small 5)")
    p.add_argument(
        "--warmup", type=whole(0), help="untimed dispatches first (default 10; --small 1)"
    )
    p.add_argument("--template", help="path of kv_cache.wgsl.jinja (default: found beside)")
    p.add_argument(
        "--report", action="store_true", help="then write docs/performance.md from --out"
    )
    p.add_argument(
        "--settle",
        type=seconds,
        default=0.0,
        metavar="SECONDS",
        help="first copy 256 MB back and forth for SECONDS, so a GPU that idled in a low clock "
        "state is up before the first timing (a shared GPU: 30 s for short runs)",
    )
    p.add_argument(
        "--retry-slow",
        type=whole(0),
        default=2,
        metavar="N",
        help="time a row again, up to N times, when the copy beside it ran in a slow state of "
        "the GPU (over 1.4x the floor plus its bytes at the run's best bandwidth) or the row "
        "fell short (--retry-below); each of kvdsl, the copy and the template keeps its fastest "
        "time over the attempts; a row whose copy is still slow is timed once more at the end "
        "of the run (2; 0: never)",
    )
    p.add_argument(
        "--retry-below",
        type=percent,
        default=90.0,
        metavar="PCT",
        help="a row also counts as short when kvdsl's kernel reached under PCT%% of the copy "
        "beside it, or a decode append took over 1.5x the empty dispatch (90; 0: never)",
    )
    p.add_argument(
        "--budget",
        type=seconds,
        metavar="SECONDS",
        help="start no new config, nor a late retry, after SECONDS (the configs left are "
        "named in the log and in device.json's 'unmeasured'; leave ~4 s a late row)",
    )
    return p
