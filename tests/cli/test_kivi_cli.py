"""``kvdsl kivi``: a KIVI decode session from the command line, its line and exit status."""

from __future__ import annotations

import pytest

from kvdsl.cli import main


def test_a_paged_session_prints_its_line(gpu, capsys):
    code = main(["kivi", "--steps", "100", "--layout", "paged", "--page-size", "64"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.startswith("kivi 2-bit, group 32, pages of 64, 2 sequences x 2 kv heads")
    assert "100 steps, 137 tokens a sequence, 4 flushes: 0 attention mismatches" in out
    assert "0 cache words off the reference: ok" in out


@pytest.mark.long
@pytest.mark.parametrize("layout", ["contiguous", "paged"])
def test_1000_steps_from_the_command_line(gpu, capsys, layout):
    assert main(["kivi", "--steps", "1000", "--layout", layout]) == 0
    assert "1000 steps, 1037 tokens a sequence, 32 flushes: 0 attention" in capsys.readouterr().out


@pytest.mark.parametrize(
    "args,message",
    [
        (["--group", "24"], "kvdsl kivi: group=24: expected a multiple of 16"),
        (["--layout", "paged", "--page-size", "48"], "page_size=48: expected a power of two"),
        (
            ["--layout", "paged", "--group", "64", "--page-size", "32"],
            "page_size=32: expected a multiple of group=64 (a page holds whole groups)",
        ),
    ],
)
def test_a_layout_it_cannot_keep_is_refused(capsys, args, message):
    assert main(["kivi", "--steps", "1", *args]) == 2
    assert message in capsys.readouterr().err
