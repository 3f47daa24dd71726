"""Interpreter speed on the corpus of runtime-style kernels: interpreter vs numpy, one run.

    python benchmarks/interp_corpus.py [--repeat N] [--only NAME ...]

Each kernel of ``tests/helpers/corpus.py`` is parsed from its WGSL file and run by the
interpreter on the case's inputs; numpy's time is the case's own statement of what the kernel
computes. Both outputs are checked against each other before timing. Times are the best of
``--repeat`` runs after a warm-up.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from arguments import whole  # noqa: E402
from kvdsl import interp  # noqa: E402
from kvdsl.frontend import parse  # noqa: E402
from tests.helpers.corpus import CASES, source  # noqa: E402


def best(fn: Callable, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=whole(1), default=3, help="timed runs, best kept (3)")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="these corpus kernels only")
    args = ap.parse_args(argv)
    names = {c.name for c in CASES}
    for name in args.only or ():
        if name not in names:
            ap.error(f"--only: no corpus kernel '{name}' (one of {', '.join(sorted(names))})")
    print(f"{'kernel':<22}{'numpy ms':>10}{'interp ms':>11}{'interp/np':>11}")
    for case in CASES:
        if args.only and case.name not in args.only:
            continue
        bufs, params, wg = case.make(np.random.default_rng(11))
        kernel = parse(Path(source(case)).read_text(), source(case), constants=case.constants)
        inputs = {k: v for k, v in bufs.items() if not k.startswith("_")}

        def run_interp():
            return interp.run(kernel, {k: v.copy() for k, v in inputs.items()}, params, wg)

        def run_numpy():
            return case.expect(bufs, params)

        got, want = run_interp(), run_numpy()
        for name, w in want.items():
            err = np.abs(got[name].astype(np.float64) - np.asarray(w, np.float64))
            bound = case.tol * (1 + np.abs(np.asarray(w, np.float64)))
            assert np.all(err <= bound), f"{case.name}: the interpreter's {name} is wrong"
        t_np = best(run_numpy, args.repeat)
        t_in = best(run_interp, args.repeat)
        print(f"{case.name:<22}{t_np * 1e3:>10.2f}{t_in * 1e3:>11.2f}{t_in / t_np:>10.1f}x")


if __name__ == "__main__":
    main()
