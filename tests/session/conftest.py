"""The session group's summary line: the fuzzed steps that ran on each host."""

from __future__ import annotations

from tests.helpers import session as tally


def pytest_terminal_summary(terminalreporter) -> None:
    """One line: how many fuzzed session steps ran, and where."""
    line = tally.summary()
    if line:
        terminalreporter.write_line(line)
