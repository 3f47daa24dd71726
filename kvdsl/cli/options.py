"""argparse types that name the option and the value when they refuse one, and the subcommand
of a handler."""

from __future__ import annotations

import argparse
import inspect
import math
from typing import Callable


def command(
    sub: argparse._SubParsersAction, handler: Callable[[argparse.Namespace], int], more: str = ""
) -> argparse.ArgumentParser:
    """The subcommand ``NAME`` that ``cmd_NAME`` runs, its texts the handler's docstring: the
    first line its help (as argparse lists commands: lower case, no period), the rest its
    description (and ``more``, text made at run time)."""
    first, _, rest = inspect.cleandoc(handler.__doc__ or "").partition("\n\n")
    help_ = first[:1].lower() + first[1:].removesuffix(".")
    description = " ".join((rest + " " + more).split())
    s = sub.add_parser(handler.__name__.removeprefix("cmd_"), help=help_, description=description)
    s.set_defaults(handler=handler)
    return s


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


def add_max_steps(s: argparse.ArgumentParser) -> None:
    """The interpreter's work budget as an option of ``s`` (``--max-steps``)."""
    from kvdsl.interp import MAX_STEPS

    s.add_argument(
        "--max-steps",
        type=positive,
        default=MAX_STEPS,
        help="the interpreter's work budget: statements one chunk of a dispatch may run before "
        f"a loop in it is taken to be endless (default {MAX_STEPS})",
    )
