"""The browser group without a browser: its tests fail (never skip), each with one line saying
what is missing, and the run's summary says the group failed and why."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.helpers.paths import ROOT

pytestmark = pytest.mark.browser

#: Two tests that need the browser, and one that does not (it runs either way).
TESTS = [
    "tests/browser/test_browser.py::test_module_lists_the_catalog",
    "tests/browser/test_browser.py::test_variant_matches_interpreter[copy_qwen25_05b]",
    "tests/browser/test_browser.py::test_runner_imports_only_the_module",
]


def test_a_missing_browser_fails_the_group_and_says_so(tmp_path):
    missing = tmp_path / "chromium"
    env = {k: v for k, v in os.environ.items() if k != "KVDSL_CHROMIUM"}
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs", *TESTS]
    run = subprocess.run(
        command,
        cwd=ROOT,
        env=env | {"KVDSL_CHROMIUM": str(missing)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "1 passed, 2 errors" in run.stdout and "skipped" not in run.stdout, run.stdout
    reason = (
        f"the browser tests need Chromium at {missing} (KVDSL_CHROMIUM), which is not there: "
        "bash scripts/setup.sh installs Debian's chromium"
    )
    assert run.stdout.count(reason) >= 2, run.stdout
    assert f"browser: the group failed: {reason}" in run.stdout.splitlines(), run.stdout
    assert "Traceback" not in run.stdout and "During handling" not in run.stdout, run.stdout
