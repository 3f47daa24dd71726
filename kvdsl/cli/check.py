"""``kvdsl check``: WGSL files parsed and verified by kvdsl, validated by naga and Tint, with a
note for each construct a WebGPU implementation was found to run otherwise than WGSL says."""

from __future__ import annotations

import argparse

from kvdsl.cli.inputs import read_wgsl, wgsl_file
from kvdsl.ir import Kernel


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
    """Parse, verify and validate WGSL files under naga and Tint; print every problem found."""
    from kvdsl.frontend import FrontendError
    from kvdsl.ir.portability import ROUNDED_F16, naga_aborts
    from kvdsl.ir.verify import house_notes
    from kvdsl.runtime import CompileError, compile_wgsl, current_webgpu, tint_check

    # the adapter's compiler
    compiler = "naga" if current_webgpu().implementation == "wgpu-native" else "dawn"
    sources: dict[str, str] = {}
    problems: list[str] = []
    notes: list[str] = []
    for path in args.files:
        sources[path] = text = read_wgsl(path)
        rounded: list[tuple[int | None, str]] = []
        kernel = None
        try:
            kernel, lines = wgsl_file(path, rounded)
        except FrontendError as err:
            problems.append(f"{err} [kvdsl]")
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


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Add ``check`` to the subcommands ``sub``."""
    s = sub.add_parser(
        "check",
        help="parse, verify and validate WGSL files (naga, Tint); note what an implementation "
        "was found to run wrong",
        description="Parse and verify WGSL files, validate them under naga and Tint, and print "
        "every problem found, then a note for each construct a WebGPU implementation was found "
        "to run otherwise than WGSL says.",
    )
    s.add_argument("files", nargs="+", metavar="FILE.wgsl")
    s.set_defaults(handler=cmd_check)
