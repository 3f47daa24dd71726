"""``kvdsl check``: WGSL files parsed and verified by kvdsl, validated by naga and Tint, with a
note for each construct a WebGPU implementation was found to run otherwise than WGSL says.

A file is validated on a device with WebGPU's default limits, raised to those the file states
(the limits line of kvdsl's own files, :data:`kvdsl.catalog_files.LIMITS_LINE`) and to those
the options give (``--max-storage-buffers``, for a file from elsewhere)."""

from __future__ import annotations

import argparse
import json

from kvdsl.cli.inputs import UsageError, read_wgsl, wgsl_file
from kvdsl.cli.options import command
from kvdsl.cli.text import escaped
from kvdsl.ir import Kernel

#: The least ``--max-storage-buffers``: WebGPU's default, which every device allows.
LEAST_STORAGE_BUFFERS = 8


def stated_limits(path: str, text: str) -> tuple[dict[str, int], str | None]:
    """The limits past WebGPU's defaults the limits line of ``text`` states (none without one),
    and a ``path:line: ...`` problem where the line is not a JSON object of known limits, each a
    whole number."""
    from kvdsl.catalog_files import LIMITS_LINE
    from kvdsl.ir.features import DEFAULT_LIMITS

    for number, line in enumerate(text.splitlines(), 1):
        if not line.startswith(LIMITS_LINE):
            continue
        stated = line[len(LIMITS_LINE) :]
        try:
            limits = json.loads(stated)
        except ValueError:
            limits = None
        if not isinstance(limits, dict) or not all(
            name in DEFAULT_LIMITS and type(n) is int and n >= DEFAULT_LIMITS[name]
            for name, n in limits.items()
        ):
            return {}, (
                f"{path}:{number}: the limits line states {stated.strip()!r}: expected a JSON "
                f"object of limits ({', '.join(DEFAULT_LIMITS)}), each a whole number at least "
                "WebGPU's default [kvdsl]"
            )
        return limits, None
    return {}, None


def _max_storage_buffers(text: str) -> int:
    """``--max-storage-buffers N``: a whole number, WebGPU's default 8 or more."""
    n = int(text) if text.strip().isdigit() else None
    if n is None or n < LEAST_STORAGE_BUFFERS:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected a whole number, {LEAST_STORAGE_BUFFERS} or more: the device's "
            "maxStorageBuffersPerShaderStage (WebGPU guarantees 8)"
        )
    return n


def _tint_did_not_run(err: RuntimeError) -> str:
    """One line saying that Tint did not run, and why (its worker's last words)."""
    text = str(err)
    if "No module named 'wgpudawn'" in text:
        return (
            "note: Tint did not run: the wgpudawn package is not installed (kvdsl depends on "
            "it: pip install wgpudawn) [tint]"
        )
    last = [line.strip() for line in text.splitlines() if line.strip()]
    return f"note: Tint did not run: {last[-1] if last else text} [tint]"


def portability_notes(path: str, kernel: Kernel, lines: dict[int, int]) -> list[str]:
    """A ``path:line: note: ... [portability]`` line for each statement of ``kernel`` that some
    WebGPU implementation was found to run otherwise than WGSL says (``lines``: statement →
    line, :func:`kvdsl.frontend.parse_with_lines`'s)."""
    from kvdsl.ir.portability import hazards

    notes = []
    for stmt, why in hazards(kernel):
        line = lines.get(id(stmt))
        notes.append(f"{path}{'' if line is None else f':{line}'}: note: {why} [portability]")
    return notes


def loop_notes(path: str, kernel: Kernel, lines: dict[int, int]) -> list[str]:
    """A ``path:line: note: ... [portability]`` line for each loop of ``kernel`` that llvmpipe
    may end early (:func:`kvdsl.ir.portability.llvmpipe_loops`)."""
    from kvdsl.ir.portability import llvmpipe_loops

    out = []
    for stmt, why in llvmpipe_loops(kernel)[1]:
        line = lines.get(id(stmt))
        out.append(f"{path}{'' if line is None else f':{line}'}: note: {why} [portability]")
    return out


def cmd_check(args: argparse.Namespace) -> int:
    """Parse, verify and validate WGSL files (naga, Tint); note what an implementation was found to run wrong.

    Parse and verify WGSL files, validate them under naga and Tint, and print every problem
    found, then a note for each construct a WebGPU implementation was found to run otherwise
    than WGSL says.
    """
    from kvdsl.frontend import FrontendError
    from kvdsl.frontend.depth import TooDeep
    from kvdsl.ir.portability import ROUNDED_F16, naga_aborts
    from kvdsl.ir.verify import house_notes
    from kvdsl.runtime import CompileError, compile_wgsl, current_webgpu, tint_check
    from kvdsl.runtime.contract import LimitError

    # the adapter's compiler
    compiler = "naga" if current_webgpu().implementation == "wgpu-native" else "dawn"
    options = {}
    if args.max_storage_buffers is not None:
        options["maxStorageBuffersPerShaderStage"] = args.max_storage_buffers
    sources: dict[str, str] = {}
    limits: dict[str, dict[str, int]] = {}
    problems: list[str] = []
    notes: list[str] = []
    failed: set[str] = set()
    ran: dict[str, list[str]] = {}  # file → what checked it: "kvdsl", compiler, "Tint"
    unparsed: set[str] = set()  # files refused for their nesting: Tint is not handed them

    def problem(path: str, line: str) -> None:
        problems.append(line)
        failed.add(path)

    for path in args.files:
        if path in sources:
            raise UsageError(f"{path!r} is given twice: give each file once")
        sources[path] = text = read_wgsl(path)
        ran[path] = ["kvdsl"]
        stated, bad = stated_limits(path, text)
        if bad is not None:
            problem(path, bad)
        limits[path] = {k: max(options.get(k, 0), stated.get(k, 0)) for k in options | stated}
        rounded: list[tuple[int | None, str]] = []
        kernel = None
        try:
            kernel, lines = wgsl_file(path, rounded)
        except TooDeep as err:  # no compiler is handed it: naga's parser would crash on it
            problem(path, f"{err} [kvdsl]")
            notes.append(
                f"{path}: note: not given to naga or Tint: nested past what they take [kvdsl]"
            )
            unparsed.add(path)
            continue
        except FrontendError as err:
            problem(path, f"{err} [kvdsl]")
        else:  # valid WGSL that some implementation was found to run otherwise: a note
            for at, literal in rounded:
                where = "" if at is None else f":{at}"
                notes.append(f"{path}{where}: note: {literal}: {ROUNDED_F16} [portability]")
            notes += portability_notes(path, kernel, lines)
            notes += loop_notes(path, kernel, lines)
            notes += [
                f"{path}: note: {why} (WGSL takes it; kvdsl refuses it in its own kernels) "
                "[house]"
                for why in house_notes(kernel)
            ]
        aborts = naga_aborts(kernel) if kernel is not None and compiler == "naga" else None
        if aborts is not None:  # valid WGSL: noted, and naga not asked
            notes.append(f"{path}: note: not compiled by naga: {aborts} [naga]")
            continue
        ran[path].append(compiler)
        try:
            compile_wgsl(text, limits[path])
        except (CompileError, LimitError) as err:
            problem(path, f"{path}: {err} [{compiler}]".replace("\n", " | "))
    try:
        tint = tint_check({p: t for p, t in sources.items() if p not in unparsed}, limits=limits)
    except RuntimeError as err:  # its worker could not run: said in one line
        tint = {}
        notes.append(_tint_did_not_run(err))
    for path, err in tint.items():
        ran[path].append("tint")
        if err is not None:
            problem(path, f"{path}: {err.strip()} [tint]".replace("\n", " | "))
    for line in problems + notes:
        print(escaped(line))
    for path in sources:
        verdict = "failed" if path in failed else "passed"
        print(escaped(f"{path}: {verdict}: {checked_by(ran[path])}"))
    print(NOT_RUN)
    print(f"{len(sources) - len(failed)} passed, {len(failed)} failed")
    return 1 if problems else 0


#: What ``kvdsl check`` does not do, said after every check.
NOT_RUN = (
    "note: check compiles and runs nothing: it does not look for races or out-of-bounds "
    "accesses (the interpreter finds them: kvdsl run FILE.wgsl --backend interp)"
)
#: How the check's report names each checker.
CHECKERS = {
    "kvdsl": "kvdsl's parser and verifier",
    "naga": "naga (wgpu-native)",
    "dawn": "Dawn",
    "tint": "Tint (Dawn)",
}


def checked_by(ran: list[str]) -> str:
    """``checked by A, B and C``, naming the checkers ``ran`` (keys of :data:`CHECKERS`), and
    those of kvdsl, naga and Tint that did not check the file."""
    names = [CHECKERS[r] for r in ran]
    said = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    missing = [c for c in ("naga", "tint") if c not in ran and not (c == "naga" and "dawn" in ran)]
    return f"checked by {said}" + (
        f"; not by {' or '.join(CHECKERS[c] for c in missing)}" if missing else ""
    )


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Add ``check`` to the subcommands ``sub``."""
    s = command(sub, cmd_check)
    s.add_argument("files", nargs="+", metavar="FILE.wgsl")
    s.add_argument(
        "--max-storage-buffers",
        type=_max_storage_buffers,
        metavar="N",
        help="validate on a device allowing N storage buffers per shader stage (8 or more; "
        "default WebGPU's 8, or what a file's limits line states: kvdsl's own files and "
        "kvdsl legacy's output state theirs)",
    )
