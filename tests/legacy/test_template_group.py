"""The legacy template group (tests/helpers/legacy.py): without a template its tests are skipped
and the summary says so in one line; under KVDSL_REQUIRE_TEMPLATE=1 (CI) they fail."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.helpers import legacy
from tests.helpers.paths import ROOT

#: Two tests that render the template, and one that does not (it runs either way).
TESTS = [
    "tests/legacy/test_legacy_harness.py::test_declarations_are_the_emitters",
    "tests/frontend/test_frontend.py::test_legacy_template_output_parses",
    "tests/legacy/test_legacy_harness.py::test_legacy_workgroups_fold",
]


def _pytest(**env: str) -> subprocess.CompletedProcess:
    ours = ("KVDSL_TEMPLATE", "KVDSL_REQUIRE_TEMPLATE")
    keep = {k: v for k, v in os.environ.items() if k not in ours}
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs", *TESTS]
    return subprocess.run(
        command, cwd=ROOT, env=keep | env, capture_output=True, text=True, timeout=300
    )


def test_a_missing_template_skips_the_group_and_says_so(tmp_path):
    missing = tmp_path / "kv_cache.wgsl.jinja"
    run = _pytest(KVDSL_TEMPLATE=str(missing))
    assert run.returncode == 0, run.stdout + run.stderr
    lines = [l for l in run.stdout.splitlines() if l.startswith(f"{legacy.GROUP}:")]
    assert len(lines) == 1, run.stdout
    assert lines[0].startswith(f"{legacy.GROUP}: ") and f"no template at {missing}" in lines[0]
    assert "set KVDSL_TEMPLATE" in lines[0]
    count = int(lines[0].split(": ")[1].split()[0])
    assert count >= 2, lines[0]
    # Only the group is skipped: the test that does not read the template ran.
    assert "1 passed" in run.stdout, run.stdout


def test_a_missing_template_fails_where_it_is_required(tmp_path):
    run = _pytest(KVDSL_TEMPLATE=str(tmp_path / "none.jinja"), KVDSL_REQUIRE_TEMPLATE="1")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "KVDSL_REQUIRE_TEMPLATE is set" in run.stdout, run.stdout
    assert f"{legacy.GROUP}:" in run.stdout and " failed" in run.stdout


def test_the_named_template_is_read():
    template = legacy.require_template()
    run = _pytest(KVDSL_TEMPLATE=str(template), KVDSL_REQUIRE_TEMPLATE="1")
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"{legacy.GROUP}:" not in run.stdout and "skipped" not in run.stdout, run.stdout
