"""``kvdsl verify``: catalog variants on random cases, the interpreter against the reference
and the GPU against the interpreter (:mod:`kvdsl.harness`)."""

from __future__ import annotations

import argparse
import sys

from kvdsl import catalog
from kvdsl.cli.inputs import UsageError
from kvdsl.cli.options import add_max_steps, command, count, positive


def _progress(done: int, total: int, label: str) -> None:
    if not sys.stderr.isatty():
        return
    width = 30
    filled = width * done // max(total, 1)
    bar = "#" * filled + "." * (width - filled)
    sys.stderr.write(f"\r[{bar}] {done}/{total} {label[:40]:<40}")
    sys.stderr.flush()


def cmd_verify(args: argparse.Namespace) -> int:
    """Verify catalog variants on random shapes.

    Verify catalog variants on random shapes: the interpreter against the reference, then the
    GPU against the interpreter, bit for bit where WGSL is exact.
    """
    from kvdsl.harness import CASES, verify_variant

    names = args.variants or list(catalog.VARIANTS)
    for name in names:
        catalog.config(name)  # unknown names fail before any work
    backends = tuple(b for b in ("interp", "gpu") if b not in (args.skip or []))
    if not backends:
        raise UsageError(
            "--skip: leaving out both interp and gpu compares nothing; leave out one at most"
        )
    results = []
    steps, total = 0, len(names) * args.cases
    for name in names:
        cfg = catalog.config(name)
        if cfg.mode not in CASES:
            raise UsageError(f"variant {name}: mode {cfg.mode!r} has no verification cases")

        def step(name=name):
            nonlocal steps
            steps += 1
            _progress(steps, total, name)

        kernel = catalog.build(name)
        results.append(
            verify_variant(name, cfg, kernel, args.cases, backends, args.seed, step, args.max_steps)
        )
    if sys.stderr.isatty():
        sys.stderr.write("\r" + " " * 80 + "\r")
    width = max(len(r.variant) for r in results)
    print(f"{'variant':<{width}}  {'shapes':<40} {'max error':>10}  verdict")
    for r in results:
        shapes = "; ".join(r.shapes)
        shapes = shapes if len(shapes) <= 40 else shapes[:37] + "..."
        verdict = "ok" if r.ok else "FAIL"
        if r.unsupported and r.ok:
            verdict = "ok (interpreter only: not on this GPU)"
        print(f"{r.variant:<{width}}  {shapes:<40} {r.max_error:>10.3g}  {verdict}")
    print(COLUMNS)
    failed = [r for r in results if not r.ok]
    for r in failed:
        for problem in r.problems[:5]:
            print(f"{r.variant}: {problem}", file=sys.stderr)
    unsupported = [r for r in results if r.unsupported]
    for r in unsupported:
        print(f"{r.variant}: not run on the GPU: {r.unsupported}", file=sys.stderr)
    # "passed" counts the variants that ran on the GPU and matched; one this GPU cannot run is
    # counted apart (or as failed, where the interpreter disagrees with the reference).
    interp_only = [r for r in unsupported if r.ok]
    print(
        f"{len(results) - len(failed) - len(interp_only)} passed, {len(failed)} failed"
        + (
            f", {len(interp_only)} checked in the interpreter only (this GPU lacks a feature)"
            if interp_only
            else ""
        )
    )
    return 1 if failed else 0


#: What the table's columns mean, printed under it.
COLUMNS = (
    "shapes: each case's shape variables; max error: the largest difference in any output of "
    "any case (the interpreter against the reference, the GPU against the interpreter), "
    "|got - expected| for floats, in units (code steps) for integers and quantised codes; 0: "
    "bit-exact; inf: a shape that differs or an element written outside its output's region"
)


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Add ``verify`` to the subcommands ``sub``."""
    s = command(sub, cmd_verify)
    s.add_argument("variants", nargs="*", metavar="VARIANT", help="default: the whole catalog")
    s.add_argument("--cases", type=positive, default=3, help="random cases per variant (default 3)")
    s.add_argument("--seed", type=count, default=0, help="random seed, 0 or more (default 0)")
    s.add_argument("--skip", action="append", choices=("interp", "gpu"), help="leave a backend out")
    add_max_steps(s)
