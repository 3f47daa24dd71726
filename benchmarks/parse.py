"""Parse time per kilobyte of WGSL: every available kernel's emitted text and legacy renders.

    python benchmarks/parse.py [--repeat N]

Prints one line per source (bytes, best-of-N milliseconds, ms/KiB) and the total.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from kvdsl.emit import emit  # noqa: E402
from arguments import whole  # noqa: E402
from kvdsl.frontend import parse  # noqa: E402
from kvdsl.frontend.parser import wgsl_parser  # noqa: E402


def sources() -> dict[str, str]:
    """Emitted kernels (catalog, else transpose variants) and legacy template renders."""
    out: dict[str, str] = {}
    try:
        from kvdsl.catalog import all_kernels

        kernels = all_kernels()
    except ImportError:
        from kvdsl.kernels.transpose import TransposeConfig, transpose

        kernels = {"transpose": transpose(TransposeConfig(8, 128, True))}
    out.update({name: emit(k) for name, k in kernels.items()})
    try:
        from tests.helpers import legacy
    except ImportError:
        return out
    for mode in legacy.MODES:
        kw = {"rotary": True} if mode == "window_shift" else {}
        v = legacy.legacy_vars(mode, **kw)
        text = legacy.render(v, legacy.legacy_bindings(v), legacy.legacy_params_struct(v))
        out[f"legacy:{mode}"] = text
    return out


def main() -> None:
    """Time :func:`parse` on every source."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=whole(1), default=5, help="timed runs, best kept (5)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    wgsl_parser()
    print(f"grammar load: {(time.perf_counter() - t0) * 1e3:.1f} ms")
    total_bytes, total_s = 0, 0.0
    for name, text in sources().items():
        best = float("inf")
        for _ in range(args.repeat):
            t = time.perf_counter()
            parse(text, f"{name}.wgsl")
            best = min(best, time.perf_counter() - t)
        size = len(text.encode())
        total_bytes += size
        total_s += best
        print(
            f"{name:48s} {size:6d} B {best * 1e3:7.2f} ms {best * 1e3 / (size / 1024):6.2f} ms/KiB"
        )
    print(
        f"{'total':48s} {total_bytes:6d} B {total_s * 1e3:7.2f} ms "
        f"{total_s * 1e3 / (total_bytes / 1024):6.2f} ms/KiB"
    )


if __name__ == "__main__":
    main()
