"""Compiler speed: kvdsl's whole catalog against jinja2 rendering the legacy template, and the
interpreter against the numpy reference, in one process.

    python benchmarks/compile.py [--repeat N] [--no-interp] [--out DIR]

- **kvdsl**: build (which verifies) and emit every catalog variant.
- **jinja2**: compile the template once (a fresh ``Environment``, so nothing is cached) and render
  it for every catalog variant, with the template variables of its config
  (``benchmarks/gpu.py:template_vars``). The resource declarations a host passes in
  (``env.wgsl.resourceDeclarations``) are printed before the clock starts: they are the host's
  work, not the template's.
- **interpreter**: ``benchmarks/interp.py``'s ``CASES`` (their sizes), interpreter time over the
  numpy reference's.

Times are the best of ``--repeat`` runs after one untimed run (the first run of each side is
reported too: it pays imports and first-use caches). Writes ``compile.json`` under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
for _p in (HERE.parent, HERE):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

import gpu  # noqa: E402  (template_vars, find_template; sets XDG_RUNTIME_DIR)
from kvdsl import catalog  # noqa: E402
from kvdsl.emit import emit  # noqa: E402
from arguments import UsageError, whole  # noqa: E402


def kvdsl_catalog() -> int:
    """Build, verify and emit every catalog variant; the characters of WGSL produced."""
    return sum(len(emit(catalog.build_config(cfg, name))) for name, cfg in catalog.VARIANTS.items())


def template_inputs() -> tuple[list[dict[str, Any]], list[str]]:
    """Per catalog variant: its template variables with the host's declarations (or why none)."""
    from tests.helpers import legacy

    inputs, skipped = [], []
    for name, cfg in catalog.VARIANTS.items():
        try:
            v = gpu.template_vars(cfg)
            decls = legacy.resource_declarations(
                legacy.legacy_bindings(v), legacy.legacy_params_struct(v)
            )
        except Exception as e:  # a config the template variables cannot express
            skipped.append(f"{name}: {type(e).__name__}: {e}")
            continue
        inputs.append(v | {"env": {"wgsl": {"resourceDeclarations": decls}}})
    return inputs, skipped


def jinja_catalog(path: Path, inputs: list[dict[str, Any]]) -> int:
    """Compile the template once and render it for every input; the characters produced."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(path.parent),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        cache_size=0,
    )
    template = env.get_template(path.name)
    return sum(len(template.render(**v)) for v in inputs)


def timings(fn: Callable[[], Any], repeat: int) -> tuple[float, float]:
    """(first run, best of ``repeat`` later runs) in seconds."""
    t = time.perf_counter()
    fn()
    first = time.perf_counter() - t
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return first, best


def interp_rows(repeat: int) -> list[dict[str, Any]]:
    """Interpreter vs numpy reference on ``benchmarks/interp.py``'s CASES."""
    import interp as bench_interp

    from kvdsl import interp

    rows = []
    for name, make in bench_interp.CASES:
        kernel, bufs, params, reference = make()
        t_np = bench_interp.best(reference, repeat)
        t_in = bench_interp.best(lambda: interp.run(kernel, bufs, params), repeat)
        rows.append({"case": name, "numpy_s": t_np, "interp_s": t_in, "ratio": t_in / t_np})
    return rows


def main(argv: list[str] | None = None) -> int:
    """Run the comparison, print it, write compile.json."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=whole(1), default=5, help="timed runs, best kept (5)")
    ap.add_argument("--no-interp", action="store_true", help="skip the interpreter comparison")
    ap.add_argument("--out", default=str(gpu.DEFAULT_OUT))
    ap.add_argument("--template", help="path of kv_cache.wgsl.jinja")
    args = ap.parse_args(argv)
    out = Path(args.out)
    try:  # bad paths fail before any timing
        path = gpu.find_template(args.template)
        out.mkdir(parents=True, exist_ok=True)
    except UsageError as e:
        ap.error(str(e))
    except OSError as e:
        ap.error(f"--out: cannot write to {str(out)!r} ({e.strerror})")
    result: dict[str, Any] = {"variants": len(catalog.VARIANTS)}
    k_first, k_best = timings(kvdsl_catalog, args.repeat)
    result |= {"kvdsl_first_s": k_first, "kvdsl_s": k_best}
    print(f"kvdsl: build + verify + emit {len(catalog.VARIANTS)} variants: {k_best * 1e3:.1f} ms")
    if path is None:
        print("jinja2: template not found")
    else:
        inputs, skipped = template_inputs()
        j_first, j_best = timings(lambda: jinja_catalog(path, inputs), args.repeat)
        result |= {"renders": len(inputs), "skipped": skipped}
        result |= {"jinja_first_s": j_first, "jinja_s": j_best, "ratio": k_best / j_best}
        print(
            f"jinja2: compile template + render {len(inputs)} configurations: "
            f"{j_best * 1e3:.1f} ms ({len(skipped)} variants have no template variables)"
        )
        print(
            f"kvdsl / jinja2 = {k_best / j_best:.2f} (best of {args.repeat}); "
            f"first runs {k_first * 1e3:.0f} ms / {j_first * 1e3:.0f} ms"
        )
    if not args.no_interp:
        rows = interp_rows(max(1, min(args.repeat, 3)))
        result["interp"] = rows
        print(f"{'case':<16}{'numpy ms':>10}{'interp ms':>11}{'interp/np':>11}")
        for r in rows:
            print(
                f"{r['case']:<16}{r['numpy_s'] * 1e3:>10.1f}{r['interp_s'] * 1e3:>11.1f}"
                f"{r['ratio']:>10.1f}x"
            )
    (out / "compile.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
