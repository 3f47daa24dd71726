"""The ``kvdsl`` command: argument parsing, the WebGPU choice, and the one error boundary.

Every error a user can cause prints as one line on stderr with exit code 2 (an option
argparse refuses: that line and a usage hint); a failed check (``verify``, ``emit --check``) or
run exits 1; nothing prints a traceback unless ``--traceback`` is given. Output cut short by its
reader (``kvdsl list | head``) ends quietly with exit code 141, as a Unix tool killed by SIGPIPE
does; Ctrl-C ends a command with one line, ``kvdsl COMMAND: interrupted``, and exit code 130. The commands live one group to a
module: :mod:`~kvdsl.cli.variants` (list, show, emit, legacy), :mod:`~kvdsl.cli.make_inputs`
(inputs), :mod:`~kvdsl.cli.run`,
:mod:`~kvdsl.cli.check`, :mod:`~kvdsl.cli.verify`, :mod:`~kvdsl.cli.session`,
:mod:`~kvdsl.cli.kivi`.
"""

from __future__ import annotations

import argparse
import os
import re
import sys

from kvdsl import catalog
from kvdsl.cli import check, kivi, make_inputs, run, session, variants, verify
from kvdsl.cli.inputs import UsageError
from kvdsl.cli.text import escaped
from kvdsl.runtime.webgpu import IMPLEMENTATIONS as WEBGPU

__all__ = ["INTERRUPTED", "UsageError", "main", "parser", "user_errors"]

DESCRIPTION = "Build, print, run and verify kvdsl's WebGPU KV-cache kernels, and check WGSL files."

EPILOG = """\
exit status: 0 done, 1 a check or a run failed, 2 bad input, 3 an internal error,
130 interrupted (Ctrl-C), 141 output cut short by its reader.

environment (the command reads them once, at its start):
  KVDSL_WEBGPU         wgpu-native (default) or dawn; --webgpu overrides it
  KVDSL_DAWN_ENABLE    Dawn toggles to turn on, comma-separated (under dawn)
  KVDSL_DAWN_DISABLE   Dawn toggles to turn off, comma-separated (under dawn)
  KVDSL_LOOP_BOUNDING  1 (default) or 0: naga's loop counters off (wgpu-native only)
"""

#: Exit code of a command whose output was cut short (128 + SIGPIPE, as a shell reports it).
BROKEN_PIPE = 141
#: Exit code of a command ended by Ctrl-C (128 + SIGINT, as a shell reports it).
INTERRUPTED = 130
#: Python's recursion limit while a command runs: the parser, the emitter and the interpreter
#: recurse about five frames an operator, and an expression may hold 512 of them (Tint's
#: expression depth, kvdsl.frontend.depth), past Python's default of 1,000.
RECURSION_LIMIT = 4000

#: argparse's words for a value its ``type=int`` / ``type=float`` refused, and ours.
_ARGPARSE_TYPES = {"int": "is not a whole number", "float": "is not a number"}


class Parser(argparse.ArgumentParser):
    """An argument parser whose refusal is one line and a usage hint, not the whole usage
    (a command's usage lists every option: a dozen lines before the one that matters)."""

    def error(self, message: str):
        """Print ``PROG: error: MESSAGE`` and a hint naming ``--help``; exit with code 2."""
        message = re.sub(
            r"invalid (int|float) value: ('.*')",
            lambda m: f"{m.group(2)} {_ARGPARSE_TYPES[m.group(1)]}",
            message,
        )
        hint = f"{self.prog}: see '{self.prog} --help' for the options"
        self.exit(2, f"{self.prog}: error: {message}\n{hint}\n")


def parser() -> argparse.ArgumentParser:
    """The ``kvdsl`` command's argument parser."""
    p = Parser(
        prog="kvdsl",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--traceback", action="store_true", help="show Python tracebacks on errors")
    p.add_argument(
        "--webgpu",
        choices=WEBGPU,
        help="WebGPU implementation that runs kernels: wgpu-native (default) or dawn (Chrome's, "
        "through the wgpudawn package); overrides KVDSL_WEBGPU",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in (variants, make_inputs, run, check, verify, session, kivi):
        group.add_commands(sub)
    return p


def user_errors() -> tuple[type[BaseException], ...]:
    """Exception types that mean bad input: one line, exit code 2."""
    from kvdsl.frontend import FrontendError
    from kvdsl.ir import DispatchError, VerifyError
    from kvdsl.kernels.config import ConfigError
    from kvdsl.runtime.contract import LimitError
    from kvdsl.runtime.errors import BufferError

    return (
        UsageError,
        catalog.UnknownVariant,
        ConfigError,
        VerifyError,
        DispatchError,
        BufferError,
        LimitError,
        FrontendError,
    )


def known_failures() -> tuple[type[BaseException], ...]:
    """Exception types of a run that failed for a stated reason: one line, exit code 1 (the
    runtime's and the interpreter's errors are RuntimeErrors)."""
    return (RuntimeError,)


def _stdout_closed() -> int:
    """The reader of stdout went away: point stdout at /dev/null, so that the interpreter's
    last flush fails no more, and end quietly."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):  # a stdout without a descriptor (in tests)
        pass
    return BROKEN_PIPE


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``kvdsl`` console script."""
    try:
        args = parser().parse_args(argv)
    except KeyboardInterrupt:
        print("kvdsl: interrupted", file=sys.stderr)
        return INTERRUPTED
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, RECURSION_LIMIT))
    try:
        return _run(args)
    except KeyboardInterrupt:  # Ctrl-C: one line, as a shell reports a process it ended
        if args.traceback:
            raise
        print(f"kvdsl {args.command}: interrupted", file=sys.stderr)
        return INTERRUPTED
    finally:
        sys.setrecursionlimit(limit)


def _run(args: argparse.Namespace) -> int:
    """Run the command ``args`` names inside the error boundary."""
    from kvdsl.runtime import WebGPU, WebGPULoaded, use_webgpu

    try:
        # The one place the command reads the environment: its KVDSL_* settings.
        webgpu = WebGPU.from_environment(os.environ, args.webgpu)
        try:
            use_webgpu(webgpu)
        except WebGPULoaded as err:  # kvdsl.cli.main called again in a process (tests)
            flag = f"--webgpu {args.webgpu}: " if args.webgpu else ""
            print(f"kvdsl: {flag}{err}", file=sys.stderr)
            return 2
        code = args.handler(args)
        sys.stdout.flush()  # a reader gone shows here, inside the boundary
        return code
    except BrokenPipeError:
        return _stdout_closed()
    except Exception as err:  # the CLI's one boundary: every error becomes one line
        if args.traceback:
            raise
        # a message may quote what the user gave: its control characters are shown escaped
        if isinstance(err, user_errors()):
            print(f"kvdsl {args.command}: {escaped(str(err))}", file=sys.stderr)
            return 2
        if isinstance(err, known_failures()):
            print(f"kvdsl {args.command}: {escaped(str(err))}", file=sys.stderr)
            return 1
        print(
            f"kvdsl {args.command}: internal error ({type(err).__name__}: {err}); "
            "rerun with --traceback and report it",
            file=sys.stderr,
        )
        return 3
