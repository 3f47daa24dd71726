"""``kvdsl session``'s refusals before it allocates or runs: memory past the machine's, and a
paged scenario past its page table (where a contiguous cache slides)."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time

import pytest

from kvdsl.cli.inputs import UsageError
from kvdsl.cli.session import _check_memory
from kvdsl.session import Spec
from tests.helpers.paths import ROOT

SMALL = ["--backend", "interp", "--layers", "1", "--batch", "2", "--kv-heads", "1"]
SMALL += ["--head-dim", "8", "--prompt", "16", "--capacity", "32", "--steps", "40"]


def session(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kvdsl", "session", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize("layout", ["contiguous", "paged"])
def test_a_million_layers_is_refused_before_allocating(layout):
    started = time.monotonic()
    out = session("--layers", "1000000", "--layout", layout, "--backend", "interp")
    assert out.returncode == 2 and out.stdout == ""
    assert re.fullmatch(
        r"kvdsl session: --layers=1000000: the session needs [\d.]+ [GT]iB \([\d.]+ MiB a layer: "
        r"K and V, [34] copies each\), past the [\d.]+ GiB of memory available; give --layers at "
        r"most \d+, (--batch at most \d+, or a smaller |or a smaller --batch, )--capacity or "
        r"--kv-heads\n",
        out.stderr,
    ), out.stderr
    assert time.monotonic() - started < 60  # nothing allocated, nothing compiled


def test_memory_refusal_names_what_fits():
    args = argparse.Namespace()
    spec = Spec(10, 2, 4, 64, 1024, "f16")  # a layer's K: 2 x 4 x 1024 x 128 bytes = 1 MiB
    _check_memory(args, spec, False, have=60 * 2**20)  # 10 layers of 6 MiB fit
    with pytest.raises(UsageError) as err:
        _check_memory(args, spec, False, have=59 * 2**20)
    assert str(err.value) == (
        "--layers=10: the session needs 60.0 MiB (6.0 MiB a layer: K and V, 3 copies each), past "
        "the 59.0 MiB of memory available; give --layers at most 9, --batch at most 1, or a "
        "smaller --capacity or --kv-heads"
    )
    with pytest.raises(UsageError, match=r"available; give a smaller --batch"):
        _check_memory(args, spec, False, have=2**20)


def test_a_million_paged_sequences_are_refused_naming_the_batch_that_fits():
    out = session("--batch", "1000000", "--layout", "paged", "--backend", "interp")
    assert out.returncode == 2 and out.stdout == ""
    m = re.search(
        r"of memory available; give --batch at most (\d+), or a smaller --capacity", out.stderr
    )
    assert m and 0 < int(m.group(1)) < 1000000, out.stderr


def test_the_batch_named_is_the_largest_that_fits():
    args = argparse.Namespace()
    spec = Spec(10, 7, 4, 64, 1024, "f16")  # a layer: 7 x 6 MiB / 2 = 21 MiB
    with pytest.raises(
        UsageError, match=r"--layers at most 4, --batch at most 3, or a smaller --capacity"
    ):
        _check_memory(args, spec, False, have=10 * 3 * 3 * 2**20 + 1)  # 3 sequences fit, not 4


def test_a_paged_table_that_would_fill_is_refused_where_a_contiguous_cache_slides():
    out = session(*SMALL)
    assert out.returncode == 0 and "0 mismatches" in out.stdout, out.stderr
    for scenario in ("decode", "mixed"):
        out = session(*SMALL, "--layout", "paged", "--scenario", scenario)
        assert out.returncode == 2 and out.stdout == ""
        m = re.fullmatch(
            r"kvdsl session: --capacity=32: a sequence of a (\d+)-token prompt would grow by up "
            r"to (\d+) tokens in this scenario, past its page table's 2 pages of 16 \(32 tokens; "
            r"a paged cache does not slide\): give --capacity (\d+) or more\n",
            out.stderr,
        )
        assert m, out.stderr
        prompt, grows, need = map(int, m.groups())
        assert prompt + grows == need and 8 <= prompt <= 16
        assert grows == 40 if scenario == "decode" else 0 < grows <= 8 * 40
        given = SMALL[:-3] + [str(need), "--steps", "40", "--layout", "paged"]
        out = session(*given, "--scenario", scenario)
        assert out.returncode == 0 and "0 mismatches" in out.stdout, out.stderr
