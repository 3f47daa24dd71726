"""examples/ in headless Chromium, as examples/README.md runs it: ``examples/headless.py`` opens
``examples/index.html?variant=NAME``, waits for the page's ``data-done`` and prints what the
page shows. For the modes the page checks (examples/check.js) the page's own comparison must
pass: every element it computes matched, no poison (NaN, -1) left where a value was due; a mode
it only shows must run to its end without an error."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers.paths import ROOT

pytestmark = pytest.mark.browser

#: Variants of every mode the page checks: the paged ones with their tables and pools as inputs.
CHECKED = [
    "paged_window_p16",
    "paged_window_p256",
    "paged_copy_int8_side_p16_llama31_8b",
    "paged_copy_f16_combined_p16_llama31_8b",
    "paged_compact_f16_separate_p16_llama31_8b",
    "copy_f16_llama31_8b",
    "transpose_flat_f16_llama31_8b",
    "merge_flat_llama31_8b",
    "merge_f32_to_f16_llama31_8b",
]
#: Variants of modes the page shows only.
SHOWN = ["paged_read_page_table_p16_hnd_llama31_8b", "attend_paged_window_f16_p16_nhd_gemma3_1b"]


@pytest.fixture(scope="module")
def pages() -> dict[str, dict]:
    """What ``python examples/headless.py --json`` printed for each variant."""
    run = subprocess.run(
        [sys.executable, "examples/headless.py", "--json", *CHECKED, *SHOWN],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    assert [p["variant"] for p in lines] == CHECKED + SHOWN, run.stdout + run.stderr
    assert run.returncode == 0, run.stdout
    return {p["variant"]: p for p in lines}


@pytest.mark.parametrize("name", CHECKED)
def test_the_page_checks_what_the_kernel_wrote(pages, name):
    page = pages[name]
    assert page["done"] == "pass", page["text"]
    assert "every written element matches" in page["text"], page["text"]
    written = [line for line in page["text"].splitlines() if "elements checked of" in line]
    assert written and all(line.endswith("all match") for line in written), page["text"]
    assert "NaN" not in page["text"], page["text"]


@pytest.mark.parametrize("name", SHOWN)
def test_the_page_shows_a_mode_it_does_not_check(pages, name):
    page = pages[name]
    assert page["done"] == "shown", page["text"]
    assert "is shown, not checked" in page["text"], page["text"]
