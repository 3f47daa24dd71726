"""Work a kernel or its input may ask for past what kvdsl can do in time or memory: endless
loops under the interpreter's work budget, dispatches past the interpreter's invocations,
comments scanned in linear time. Each refusal is one located line (docs/errors.md)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from kvdsl import cli
from kvdsl.frontend import comments, parse_with_lines
from kvdsl.interp import MAX_INVOCATIONS, WorkBudget, run as interp_run

#: The endless kernels' bindings and entry point, before their bodies.
HEAD = """\
struct Params { n: u32 }
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<uniform> params: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
"""

ENDLESS_FOR = HEAD + """\
    var c = gid.x;
    for (var i = 0u; i < params.n; i = i + params.n - 1u) {
        c = c + 1u;
        c = c * 3u;
        c = c ^ gid.x;
    }
    out[gid.x] = c;
}
"""

ENDLESS_LOOP = HEAD + """\
    var c = 0u;
    loop {
        if (c == params.n) { break; }
        c = c + 2u;
    }
    out[gid.x] = c;
}
"""


def _run(tmp_path, capsys, source: str, *extra: str) -> tuple[int, str]:
    src = tmp_path / "k.wgsl"
    src.write_text(source)
    np.savez(tmp_path / "in.npz", out=np.full(64, 0xDEADBEEF, np.uint32))
    argv = ["run", str(src), "--inputs", str(tmp_path / "in.npz"), "--backend", "interp"]
    argv += ["--params", '{"n": 7}', "--out", str(tmp_path / "o.npz"), "--workgroups", "1,1,1"]
    code = cli.main(argv + list(extra))
    return code, capsys.readouterr().err


def test_an_endless_loop_stops_within_seconds_at_its_source_line(tmp_path, capsys):
    # n = 7: the for loop's update adds 6 from 0 (i < 7 holds for 0 and 6, then 12 ends it) and
    # the loop's c steps by 2 past 7 forever. The budget names the loop's line and the option.
    small = ["--max-steps", "20000"]
    for source, line, head in (
        (ENDLESS_FOR.replace("params.n - 1u", "0u"), 8, "`for (var i: u32 = 0u; i < params.n"),
        (ENDLESS_LOOP, 8, "`loop`"),
    ):
        start = time.perf_counter()
        code, err = _run(tmp_path, capsys, source, *small)
        assert time.perf_counter() - start < 20, "the budget fired late"
        assert code == 1 and err.count("\n") == 1, err
        assert f"{head}" in err and f"(line {line})" in err, err
        assert "past the interpreter's budget of 20,000 statements" in err, err
        assert "--max-steps" in err and "Traceback" not in err, err
    # The same loops ending (the for loop's step of 6; the loop's n even) run within the budget.
    code, err = _run(tmp_path, capsys, ENDLESS_FOR, *small)
    assert code == 0, err
    gid = np.arange(64, dtype=np.uint32)
    c = gid.copy()
    for _ in range(2):
        c = ((c + 1) * 3) ^ gid
    assert np.array_equal(np.load(tmp_path / "o.npz")["out"], c)


def test_the_budget_is_raised_by_an_option_and_a_keyword(tmp_path, capsys):
    # A loop of 30,000 trips needs about 60,000 statements: refused under a budget of 10,000,
    # run under the default, and the Python API's max_steps says the same.
    source = ENDLESS_LOOP.replace("c + 2u", "c + 1u")
    src = tmp_path / "k.wgsl"
    src.write_text(source)
    kernel, lines = parse_with_lines(source)
    buffers = {"out": np.full(64, 0xDEADBEEF, np.uint32)}
    try:
        interp_run(kernel, buffers, {"n": 30000}, (1, 1, 1), source_lines=lines, max_steps=10000)
    except WorkBudget as err:
        assert "(line 8)" in str(err) and "budget of 10,000 statements" in str(err)
    else:
        raise AssertionError("a budget of 10,000 statements let 60,000 run")
    out = interp_run(kernel, buffers, {"n": 30000}, (1, 1, 1), max_steps=100000)
    assert (out["out"] == 30000).all()
    np.savez(tmp_path / "in.npz", out=buffers["out"])
    base = ["run", str(src), "--inputs", str(tmp_path / "in.npz"), "--backend", "interp"]
    base += ["--params", '{"n": 30000}', "--workgroups", "1,1,1"]
    assert cli.main(base + ["--max-steps", "10000"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "kvdsl run: kernel k: " in err and "(line 8)" in err, err
    assert cli.main(base + ["--max-steps", "100000"]) == 0
    with pytest.raises(SystemExit) as usage:  # argparse: the usage, then one line
        cli.main(base + ["--max-steps", "0"])
    assert usage.value.code == 2
    assert "--max-steps: 0 is out of range: give 1 or more" in capsys.readouterr().err


def test_a_dispatch_past_the_interpreters_invocations_is_refused(tmp_path, capsys):
    # 65535 x 65535 x 64 workgroups of 64: WebGPU's limits allow it, no machine's memory holds
    # its interpretation; the refusal names the option, the invocations and the limit.
    code, err = _run(tmp_path, capsys, ENDLESS_FOR, "--workgroups", "65535,65535,64")
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith("kvdsl run: --workgroups: workgroups 65535,65535,64 of 64x1x1"), err
    assert (
        f"{65535 * 65535 * 64 * 64:,} invocations" in err and f"({MAX_INVOCATIONS:,})" in err
    ), err
    # One workgroup past the limit is refused.
    code, err = _run(tmp_path, capsys, ENDLESS_FOR, "--workgroups", "1048577,1,1")
    assert code == 2 and "67,108,928 invocations" in err, err


def test_comments_are_scanned_in_linear_time():
    # 5 MB of line comments, and of block comments, each scanned in well under 3 s (a scan
    # counting lines from the start of the text each time took 72 s); lines and own-line flags
    # stay right around them.
    line = "// a line comment, " + "x" * 40 + "\n"
    block = "/* a block comment " + "y" * 40 + " */\n"
    for text in (line * (5_000_000 // len(line)), block * (5_000_000 // len(block))):
        start = time.perf_counter()
        found, blank = comments.scan(text)
        assert time.perf_counter() - start < 3
        assert len(blank) == len(text) and blank.count("\n") == text.count("\n")
        assert len(found) == (text.count("\n") if text.startswith("//") else 0)
    found, blank = comments.scan("a /* b\nc */ // d\n// e\n  x; // f\n/**/ // g\n")
    assert [(c.line, c.text, c.own_line) for c in found] == [
        (2, "d", False),
        (3, "e", True),
        (4, "f", False),
        (5, "g", False),
    ]
    assert blank == "a" + " " * 5 + "\n" + " " * 9 + "\n    \n  x;     \n" + " " * 9 + "\n"
