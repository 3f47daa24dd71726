"""README stays true: its authoring example runs, and its commands exist."""

from __future__ import annotations

import re

from kvdsl.cli import parser
from tests.helpers.paths import ROOT

README = (ROOT / "README.md").read_text()


def test_authoring_example_runs(gpu):
    code = re.search(r"```python\n(.*?)```", README, re.S).group(1)
    exec(compile(code, "README.md", "exec"), {})


def test_quick_start_is_two_commands_and_ci_runs_the_second():
    commands = re.findall(r"^    (bash scripts/setup\.sh && .+)$", README, re.M)
    assert len(commands) == 2
    ci = (ROOT / ".ci" / "run").read_text()
    assert commands[1] in ci


def test_every_documented_command_exists():
    documented = set(re.findall(r"^\| `kvdsl (\w+)", README, re.M))
    subcommands = parser()._subparsers._group_actions[0].choices
    assert documented == set(subcommands)


def test_readme_counts_the_catalog():
    from kvdsl import catalog

    assert f"`kvdsl list` names {len(catalog.VARIANTS)} variants" in README


def test_readme_is_short_and_names_the_benchmark():
    assert len(README.splitlines()) <= 150
    assert "    python benchmarks/gpu.py " in README


def test_docs_keep_no_diary():
    """README and docs are reference: what happened belongs in commit messages."""
    diary = re.compile(r"\b(runs?|probes?) [0-9]+\b|\b[a-z]+th stop\b|\bthis stop\b", re.I)
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        found = diary.search(path.read_text())
        assert found is None, f"{path.name}: {found.group(0)!r}"
