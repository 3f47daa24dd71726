"""argparse types that name the option and the value when they refuse one, and the GPU
benchmark's options, built from them."""

from __future__ import annotations

import argparse
import math
from typing import Callable


def whole(least: int = 0, most: int | None = None) -> Callable[[str], int]:
    """An argparse type: a whole number from ``least`` to ``most`` (argparse names the option
    and the value when it raises)."""

    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if n < least or (most is not None and n > most):
            allowed = f"{least} to {most}" if most is not None else f"{least} or more"
            why = "is negative" if n < 0 and least == 0 else "is out of range"
            raise argparse.ArgumentTypeError(f"{n} {why}: give {allowed}")
        return n

    return parse


#: A whole number, 0 or more; 1 or more.
count = whole(0)
positive = whole(1)


def repeats(text: str) -> int:
    """Timed dispatches: 1 to what one submission's timestamp queries hold."""
    from kvdsl.runtime.execute import MAX_REPEATS

    return whole(1, MAX_REPEATS)(text)


def real(number: str, what: str, allowed: str, ok: Callable[[float], bool]):
    """An argparse type: a number for which ``ok`` holds (argparse names the option and the
    value when it raises): ``text`` is not ``number``, or the value is not ``what``."""

    def parse(text: str) -> float:
        try:
            x = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {number}") from None
        if not ok(x):  # NaN fails every comparison
            raise argparse.ArgumentTypeError(f"{x:g} is not {what}: give {allowed}")
        return x

    return parse


seconds = real("a number of seconds", "a time", "0 or more seconds", lambda x: 0 <= x < math.inf)
percent = real("a number", "a percentage", "0 to 100", lambda x: 0 <= x <= 100)


def bench_options(p: argparse.ArgumentParser, out: str) -> argparse.ArgumentParser:
    """The GPU benchmark's options (``benchmarks/gpu.py``'s), added to ``p``; ``out`` is
    ``--out``'s default."""
    p.add_argument("--small", action="store_true", help="tiny sizes (llvmpipe smoke run)")
    p.add_argument("--out", default=out, help="folder for gpu.csv and device.json")
    p.add_argument("--variants", nargs="*", metavar="NAME", help="variant or mode names")
    p.add_argument("--batches", type=positive, nargs="*", help="batch sizes (default 1 and 4)")
    p.add_argument("--trials", type=positive, default=2, help="alternating timings, best kept (2)")
    p.add_argument("--repeats", type=repeats, help="timed dispatches (default 100; --small 5)")
    p.add_argument("--warmup", type=count, help="untimed dispatches first (default 10; --small 1)")
    p.add_argument("--template", help="path of kv_cache.wgsl.jinja (default: found beside)")
    p.add_argument("--report", action="store_true", help="then write docs/performance.md")
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
        type=count,
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
