"""The ``kvdsl`` command line.

Every error a user can cause prints as one line on stderr with exit code 2; a failed check
(``verify``, ``emit --check``) exits 1; nothing prints a traceback unless ``--traceback`` is given.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

from kvdsl import catalog

# kvdsl.runtime.device.IMPLEMENTATIONS, spelt here so parsing the command line loads no wgpu.
WEBGPU = ("wgpu-native", "dawn")

COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {}


class UsageError(ValueError):
    """Bad command-line input (a file, a JSON value, a list)."""


def command(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    COMMANDS[fn.__name__.removeprefix("cmd_")] = fn
    return fn


@command
def cmd_list(args: argparse.Namespace) -> int:
    """List catalog variants."""
    if args.json:
        print(json.dumps({n: catalog.describe(n) for n in catalog.VARIANTS}, indent=2))
        return 0
    width = max(map(len, catalog.VARIANTS))
    for name in catalog.VARIANTS:
        cfg = catalog.describe(name)
        mode = cfg.pop("mode")
        opts = " ".join(f"{k}={v}" for k, v in cfg.items())
        print(f"{name:<{width}}  {mode:<12} {opts}")
    return 0


@command
def cmd_show(args: argparse.Namespace) -> int:
    """Print one variant's WGSL."""
    from kvdsl.emitted import header
    from kvdsl.emit import emit

    sys.stdout.write(header(args.variant, catalog.config(args.variant)))
    sys.stdout.write(emit(catalog.build(args.variant)))
    return 0


@command
def cmd_emit(args: argparse.Namespace) -> int:
    """Write emitted/ (or check it is current)."""
    from kvdsl import emitted

    out = Path(args.out)
    if args.check:
        diff = emitted.stale(out)
        if diff:
            sys.stdout.write(diff)
            print(f"kvdsl: {out}/ is stale: run `kvdsl emit --out {out}`", file=sys.stderr)
            return 1
        print(f"{out}/ is up to date ({len(catalog.VARIANTS)} variants)")
        return 0
    try:
        names = emitted.write(out)
    except OSError as err:
        raise UsageError(f"--out: cannot write to {str(out)!r} ({err.strerror})") from None
    print(f"wrote {len(names)} files to {out}/")
    return 0


def _load_json(text: str, what: str) -> Any:
    """``text`` as JSON, or the JSON in the file it names (a JSON object or array is never taken
    for a path: past 255 bytes the OS refuses such a name)."""
    src = text
    if not text.lstrip().startswith(("{", "[")):
        try:
            src = Path(text).read_text(encoding="utf-8") if Path(text).is_file() else text
        except OSError as err:
            raise UsageError(f"{what}: cannot read {text!r} ({err.strerror})") from None
        except UnicodeDecodeError as err:
            raise UsageError(f"{what}: {text!r} is not UTF-8 text (byte {err.start})") from None
    try:
        return json.loads(src)
    except json.JSONDecodeError as err:
        raise UsageError(f"{what}: not valid JSON ({err.msg} at column {err.colno})") from None


def _load_inputs(path: str) -> dict[str, np.ndarray]:
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"--inputs: no such file {path!r}")
    try:
        with np.load(p) as npz:
            return {k: npz[k] for k in npz.files}
    except (ValueError, OSError) as err:
        raise UsageError(f"--inputs: {path!r} is not an .npz archive ({err})") from None


def _workgroups(text: str | None) -> tuple[int, int, int] | None:
    if text is None:
        return None
    parts = text.split(",")
    if len(parts) != 3 or not all(p.strip().isdigit() for p in parts):
        raise UsageError(f"--workgroups={text!r}: expected three non-negative integers X,Y,Z")
    x, y, z = (int(p) for p in parts)
    return x, y, z


def _read_wgsl(path: str) -> str:
    """A WGSL file's text (UTF-8, as WGSL source is)."""
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"no such WGSL file {path!r}")
    try:
        return p.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise UsageError(
            f"{path!r} is not UTF-8 text (byte {err.start}): WGSL source is UTF-8"
        ) from None


def _wgsl_file(
    path: str, rounded: list[tuple[int | None, str]] | None = None
) -> tuple[Any, dict[int, int]]:
    """Parse a WGSL file into a verified kernel and its statement → line map (``rounded``:
    :func:`kvdsl.frontend.parse_with_lines`'s)."""
    from kvdsl.frontend import parse_with_lines

    return parse_with_lines(_read_wgsl(path), filename=path, rounded=rounded)


@command
def cmd_run(args: argparse.Namespace) -> int:
    """Run a variant (or a WGSL file) on given inputs; write every read_write buffer."""
    lines = None
    if args.variant.endswith(".wgsl"):
        kernel, lines = _wgsl_file(args.variant)
        if args.workgroups is None:
            raise UsageError(f"{args.variant}: a WGSL file has no dispatch rule: give --workgroups")
    else:
        kernel = catalog.build(args.variant)
    buffers = _load_inputs(args.inputs)
    params = _load_json(args.params, "--params") if args.params else {}
    if not isinstance(params, dict):
        raise UsageError(f"--params: expected a JSON object of params fields, got {params!r}")
    workgroups = _workgroups(args.workgroups)
    if args.tol is not None and (args.backend != "both" or not 0 <= args.tol < float("inf")):
        raise UsageError(
            f"--tol={args.tol!r}: a relative tolerance of 0 or more, with --backend both only"
        )
    size = _subgroup_size(args, kernel)
    outputs: dict[str, np.ndarray] = {}
    if args.backend in ("interp", "both"):
        from kvdsl.interp import run as interp_run
        from kvdsl.runtime.checks import check_contract

        check_contract(kernel, buffers, params)  # the same host checks as the GPU path
        copies = {k: v.copy() for k, v in buffers.items()}  # the GPU starts from the inputs too
        outputs = interp_run(
            kernel, copies, params, workgroups, source_lines=lines, subgroup_size=size
        )
    if args.backend in ("gpu", "both"):
        from kvdsl.runtime import run

        want, outputs = outputs, run(kernel, dict(buffers), params, workgroups)
    differ = False
    if args.backend == "both":
        for name, got in outputs.items():
            same, line = _agreement(name, got, want[name], args.tol or 0.0)
            differ |= not same
            print(line)
        if differ and lines is not None:  # what an implementation was found to run wrong
            from kvdsl.ir.portability import hazards

            for stmt, why in hazards(kernel):
                at = lines.get(id(stmt))
                print(f"{args.variant}{'' if at is None else f':{at}'}: note: {why} [portability]")
        outputs = outputs | {f"interp.{k}": v for k, v in want.items()}
    if args.out:
        try:
            np.savez(args.out, **outputs)
        except OSError as err:
            raise UsageError(f"--out: cannot write {args.out!r} ({err.strerror})") from None
        print(f"wrote {', '.join(outputs)} to {args.out}")
    elif args.backend != "both":
        for name, arr in outputs.items():
            print(f"{name}: {arr.dtype}{list(arr.shape)} {np.array2string(arr.ravel()[:8])}")
    return 1 if differ else 0


def _subgroup_size(args: argparse.Namespace, kernel: Any) -> int:
    """The subgroup size to interpret ``kernel`` at: ``--subgroup-size``, else (with
    ``--backend both``, for a kernel that uses subgroups) the adapter's, else 32."""
    from kvdsl.interp import SUBGROUP_SIZES
    from kvdsl.ir.verify import uses_subgroups

    if args.subgroup_size is not None:
        if args.backend == "gpu":
            raise UsageError(
                f"--subgroup-size={args.subgroup_size}: the interpreter's, with --backend "
                "interp or both only (the GPU's is its own)"
            )
        if args.subgroup_size not in SUBGROUP_SIZES:
            raise UsageError(
                f"--subgroup-size={args.subgroup_size}: expected a power of two in 4..128"
            )
        return args.subgroup_size
    if args.backend == "both" and uses_subgroups(kernel):
        from kvdsl.runtime import subgroup_size

        return subgroup_size() or 32  # none: the GPU run says the feature is missing
    return 32


def _agreement(name: str, got: np.ndarray, want: np.ndarray, tol: float) -> tuple[bool, str]:
    """Whether the GPU's ``got`` equals the interpreter's ``want`` (integers bit for bit; floats
    bit for bit or both NaN, or within ``tol`` of ``want`` relative to 1 + |want|), and a line
    saying so."""
    g, w = got.reshape(-1), want.reshape(-1)
    size = f"{got.dtype}{list(got.shape)}"
    if g.dtype.kind == "f":
        bits = f"u{g.dtype.itemsize}"
        same = (g.view(bits) == w.view(bits)) | (np.isnan(g) & np.isnan(w))
        if tol:
            with np.errstate(all="ignore"):
                a, b = g.astype(np.float64), w.astype(np.float64)
                same |= np.abs(a - b) <= tol * (1 + np.abs(b))
    else:
        same = g == w
    if same.all():
        return True, f"{name}: {size}, GPU == interpreter" + (f" (within {tol:g})" if tol else "")
    i = int(np.flatnonzero(~same)[0])
    return False, (
        f"{name}: {size}, {int((~same).sum())} of {g.size} elements differ, first at {i}: "
        f"GPU {g[i].item()!r}, interpreter {w[i].item()!r}"
    )


@command
def cmd_check(args: argparse.Namespace) -> int:
    """Parse, verify and validate WGSL files under naga and Tint; print every problem found."""
    from kvdsl.frontend import FrontendError
    from kvdsl.runtime import CompileError, compile_wgsl, tint_check
    from kvdsl.runtime.device import IMPLEMENTATION

    from kvdsl.ir.portability import ROUNDED_F16, hazards

    compiler = "naga" if IMPLEMENTATION == "wgpu-native" else "dawn"  # the adapter's compiler
    sources: dict[str, str] = {}
    problems: list[str] = []
    notes: list[str] = []
    for path in args.files:
        sources[path] = text = _read_wgsl(path)
        rounded: list[tuple[int | None, str]] = []
        try:
            kernel, lines = _wgsl_file(path, rounded)
        except FrontendError as err:
            problems.append(f"{err} [kvdsl]")
        else:  # valid WGSL that some implementation was found to run otherwise: a note
            for at, literal in rounded:
                where = "" if at is None else f":{at}"
                notes.append(f"{path}{where}: note: {literal}: {ROUNDED_F16} [portability]")
            for stmt, why in hazards(kernel):
                line = lines.get(id(stmt))
                notes.append(
                    f"{path}{'' if line is None else f':{line}'}: note: {why} [portability]"
                )
        try:
            compile_wgsl(text)
        except CompileError as err:
            problems.append(f"{path}: {err} [{compiler}]".replace("\n", " | "))
    for path, err in tint_check(sources).items():
        if err is not None:
            problems.append(f"{path}: {err.strip()} [tint]".replace("\n", " | "))
    for line in problems + notes:
        print(line)
    ok = len(sources) - len({p.split(":")[0] for p in problems})
    print(f"{ok} passed, {len(sources) - ok} failed")
    return 1 if problems else 0


@command
def cmd_legacy(args: argparse.Namespace) -> int:
    """Print the WGSL kvdsl emits for the legacy template's variables."""
    from kvdsl.emit import emit
    from kvdsl.emitted import interface
    from kvdsl.kernels.config import as_dict
    from kvdsl.legacy import config_from_vars

    data = _load_json(args.vars, "--vars")
    if not isinstance(data, dict):
        raise UsageError(f"--vars: expected a JSON object of template variables, got {data!r}")
    cfg = config_from_vars(data)
    if args.subgroups:
        if not getattr(cfg, "k_norm", False):
            raise UsageError(
                f"--subgroups: expected variables of a K RMSNorm kernel (the only row reduction); "
                f"these make a {cfg.mode} kernel without one"
            )
        cfg = dataclasses.replace(cfg, reduction="subgroup")
    kernel = catalog.build_config(cfg)
    wgsl = emit(kernel)
    d = interface(kernel, wgsl)["dispatch"]
    sys.stdout.write(
        f"// kvdsl {cfg.mode} for the legacy template's variables; config: "
        f"{json.dumps(as_dict(cfg))}\n"
        f"// dispatch: ceil(({d['items']}) / {d['per_workgroup']}) workgroups, "
        f"folded into y past {d['fold']}\n\n" + wgsl
    )
    return 0


def _progress(done: int, total: int, label: str) -> None:
    if not sys.stderr.isatty():
        return
    width = 30
    filled = width * done // max(total, 1)
    bar = "#" * filled + "." * (width - filled)
    sys.stderr.write(f"\r[{bar}] {done}/{total} {label[:40]:<40}")
    sys.stderr.flush()


@command
def cmd_verify(args: argparse.Namespace) -> int:
    """Verify catalog variants: interpreter vs reference, GPU vs interpreter."""
    from kvdsl.check import CASES, verify_variant

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
        results.append(verify_variant(name, cfg, kernel, args.cases, backends, args.seed, step))
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


def _benchmarks() -> Path:
    folder = Path(__file__).resolve().parent.parent / "benchmarks"
    if not (folder / "gpu.py").is_file():
        raise UsageError("bench runs from a source checkout (benchmarks/gpu.py not found)")
    return folder


@command
def cmd_bench(args: argparse.Namespace) -> int:
    """GPU benchmark of the catalog against the vec4 copy roofline and the legacy template."""
    folder = str(_benchmarks())
    if folder not in sys.path:
        sys.path.insert(0, folder)
    import gpu  # benchmarks/gpu.py: a script beside the package, not part of it

    return gpu.bench(args)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kvdsl", description=__doc__.splitlines()[0])
    p.add_argument("--traceback", action="store_true", help="show Python tracebacks on errors")
    p.add_argument(
        "--webgpu",
        choices=WEBGPU,
        help="WebGPU implementation that runs kernels: wgpu-native (default) or dawn (Chrome's, "
        "through the wgpudawn package); sets KVDSL_WEBGPU",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    s = sub.add_parser("list", help="list catalog variants")
    s.add_argument("--json", action="store_true", help="configs as JSON")
    s = sub.add_parser("show", help="print a variant's WGSL")
    s.add_argument("variant")
    s = sub.add_parser("emit", help="write emitted/<variant>.wgsl and index.json")
    s.add_argument("--out", default="emitted", help="output folder (default: emitted)")
    s.add_argument("--check", action="store_true", help="fail with a diff if the folder is stale")
    s = sub.add_parser("run", help="run a variant or a WGSL file on inputs from an .npz")
    s.add_argument("variant", metavar="VARIANT|FILE.wgsl")
    s.add_argument("--inputs", required=True, help=".npz with one array per binding name")
    s.add_argument("--params", help="JSON object of params fields (or a file holding one)")
    s.add_argument(
        "--out",
        help="write read_write buffers to this .npz (with --backend both the interpreter's "
        "too, as interp.NAME)",
    )
    s.add_argument("--workgroups", help="X,Y,Z (default: the kernel's dispatch rule)")
    s.add_argument(
        "--backend",
        choices=("gpu", "interp", "both"),
        default="gpu",
        help="both: run on the GPU and in the interpreter, compare every read_write buffer, exit 1 "
        "where they differ",
    )
    s.add_argument(
        "--subgroup-size",
        type=int,
        help="the interpreter's subgroup size (a power of two in 4..128; default 32, or with "
        "--backend both the adapter's)",
    )
    s.add_argument(
        "--tol",
        type=float,
        help="with --backend both: floats may differ by TOL * (1 + |interpreter's|) (default: "
        "bit for bit)",
    )
    s = sub.add_parser(
        "check",
        help="parse, verify and validate WGSL files (naga, Tint); note what an implementation "
        "was found to run wrong",
    )
    s.add_argument("files", nargs="+", metavar="FILE.wgsl")
    s = sub.add_parser("legacy", help="kvdsl's WGSL for the legacy template's variables")
    s.add_argument("--vars", required=True, help="JSON object of template variables (or a file)")
    s.add_argument(
        "--subgroups",
        action="store_true",
        help="K RMSNorm summed across the subgroup (the *_knorm_sg_* drop-ins' form; the device "
        "needs WGSL's subgroups)",
    )
    s = sub.add_parser("verify", help="verify catalog variants on random shapes")
    s.add_argument("variants", nargs="*", metavar="VARIANT", help="default: the whole catalog")
    s.add_argument(
        "--cases", type=_positive, default=3, help="random cases per variant (default 3)"
    )
    s.add_argument("--seed", type=_count, default=0, help="random seed, 0 or more (default 0)")
    s.add_argument("--skip", action="append", choices=("interp", "gpu"), help="leave a backend out")
    s = sub.add_parser("bench", help="GPU benchmark: roofline, template, floor (source checkout)")
    bench_options(s, "benchmarks/out")
    return p


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


_count = whole(0)
_positive = whole(1)


def _repeats(text: str) -> int:
    """Timed dispatches: 1 to what one submission's timestamp queries hold."""
    from kvdsl.runtime.execute import MAX_REPEATS

    return whole(1, MAX_REPEATS)(text)


def _real(number: str, what: str, allowed: str, ok: Callable[[float], bool]):
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


_seconds = _real("a number of seconds", "a time", "0 or more seconds", lambda x: 0 <= x < math.inf)
_percent = _real("a number", "a percentage", "0 to 100", lambda x: 0 <= x <= 100)


def bench_options(p: argparse.ArgumentParser, out: str) -> argparse.ArgumentParser:
    """The GPU benchmark's options, for ``kvdsl bench`` and ``benchmarks/gpu.py`` alike."""
    p.add_argument("--small", action="store_true", help="tiny sizes (llvmpipe smoke run)")
    p.add_argument("--out", default=out, help="folder for gpu.csv and device.json")
    p.add_argument("--variants", nargs="*", metavar="NAME", help="variant or mode names")
    p.add_argument("--batches", type=_positive, nargs="*", help="batch sizes (default 1 and 4)")
    p.add_argument("--trials", type=_positive, default=2, help="alternating timings, best kept (2)")
    p.add_argument("--repeats", type=_repeats, help="timed dispatches (default 100; --small 5)")
    p.add_argument("--warmup", type=_count, help="untimed dispatches first (default 10; --small 1)")
    p.add_argument("--template", help="path of kv_cache.wgsl.jinja (default: found beside)")
    p.add_argument("--report", action="store_true", help="then write docs/performance.md")
    p.add_argument(
        "--settle",
        type=_seconds,
        default=0.0,
        metavar="SECONDS",
        help="first copy 256 MB back and forth for SECONDS, so a GPU that idled in a low clock "
        "state is up before the first timing (a shared GPU: 30 s for short runs)",
    )
    p.add_argument(
        "--retry-slow",
        type=_count,
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
        type=_percent,
        default=90.0,
        metavar="PCT",
        help="a row also counts as short when kvdsl's kernel reached under PCT%% of the copy "
        "beside it, or a decode append took over 1.5x the empty dispatch (90; 0: never)",
    )
    p.add_argument(
        "--budget",
        type=_seconds,
        metavar="SECONDS",
        help="start no new config, nor a late retry, after SECONDS (the configs left are "
        "named in the log and in device.json's 'unmeasured'; leave ~4 s a late row)",
    )
    return p


def user_errors() -> tuple[type[BaseException], ...]:
    """Exception types that mean bad input: one line, exit code 2."""
    from kvdsl.ir import DispatchError, VerifyError
    from kvdsl.kernels.config import ConfigError

    errors: list[type[BaseException]] = [
        UsageError,
        catalog.UnknownVariant,
        ConfigError,
        VerifyError,
        DispatchError,
    ]
    try:
        from kvdsl.runtime.checks import LimitError
        from kvdsl.runtime.errors import BufferError

        errors += [BufferError, LimitError]
    except Exception:  # the runtime cannot load (no wgpu, a bad KVDSL_WEBGPU): none was raised
        pass
    from kvdsl.frontend import FrontendError

    errors.append(FrontendError)
    return tuple(errors)


def known_failures() -> tuple[type[BaseException], ...]:
    """Exception types of a run that failed for a stated reason: one line, exit code 1 (the
    runtime's and the interpreter's errors are RuntimeErrors)."""
    return (RuntimeError,)


def select_webgpu(name: str) -> None:
    """Make ``name`` the WebGPU implementation of this process (before the runtime loads)."""
    loaded = sys.modules.get("kvdsl.runtime.device")
    if loaded is not None and loaded.IMPLEMENTATION != name:
        raise ValueError(
            f"--webgpu {name}: this process already runs kernels on {loaded.IMPLEMENTATION}; "
            "the implementation is chosen once per process"
        )
    os.environ["KVDSL_WEBGPU"] = name


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``kvdsl`` console script."""
    args = parser().parse_args(argv)
    if args.webgpu:
        try:
            select_webgpu(args.webgpu)
        except ValueError as err:
            print(f"kvdsl: {err}", file=sys.stderr)
            return 2
    try:
        return COMMANDS[args.command](args)
    except Exception as err:  # the CLI's one boundary: every error becomes one line
        if args.traceback:
            raise
        if isinstance(err, user_errors()):
            print(f"kvdsl {args.command}: {err}", file=sys.stderr)
            return 2
        if isinstance(err, known_failures()):
            print(f"kvdsl {args.command}: {err}", file=sys.stderr)
            return 1
        print(
            f"kvdsl {args.command}: internal error ({type(err).__name__}: {err}); "
            "rerun with --traceback and report it",
            file=sys.stderr,
        )
        return 3
