"""llvmpipe's loop cap (docs/deviations.md): an invocation's loops end after 65,535 trips, all
of them together. On llvmpipe the test observes it; everywhere ``kvdsl check`` notes loops that
may meet it and ``kvdsl run`` refuses a GPU result that may have, from the interpreter's count."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import cli
from kvdsl.interp import run as interp_run
from kvdsl.frontend import parse_with_lines
from kvdsl.ir.portability import LLVMPIPE_LOOP_TRIPS, llvmpipe_loops
from kvdsl.runtime import run as gpu_run

TWO_LOOPS = """\
struct Params { n: u32, m: u32 }
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<uniform> params: Params;

@compute @workgroup_size(16)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    var c = 0u;
    for (var i = 0u; i < params.n; i = i + 1u) {
        c = c + 1u;
    }
    var d = gid.x;
    for (var i = 0u; i < params.m; i = i + 1u) {
        d = d + 1u;
    }
    out[gid.x] = c * 65536u + d;
}
"""

FIXED = """\
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
const N: u32 = 40000u;
@compute @workgroup_size(1)
fn main() {
    var c = 0u;
    for (var i = 0u; i < N; i += 1u) {
        c = c + 3u;
    }
    for (var i = 0u; i <= N; i++) {
        c = c + 5u;
    }
    for (var i = 0u; i < 8u; i++) {
        c = c + 7u;
    }
    out[0] = c;
}
"""


def packed(c: int, d: int) -> np.ndarray:
    """What TWO_LOOPS writes where its loops made ``c`` and ``d`` trips."""
    return ((c * 65536 + d + np.arange(16, dtype=np.int64)) % 2**32).astype(np.uint32)


@pytest.mark.parametrize("n, m", [(70000, 5), (40000, 40000), (60000, 5)])
def test_llvmpipe_ends_an_invocations_loops_after_65535_trips(gpu, n, m):
    # The interpreter runs WGSL's trips; llvmpipe counts every trip of every loop of the
    # invocation (each loop's last test too) and stops at 65,535: 70,000 trips give 65,535 and
    # the loop after it one; 40,000 and 40,000 leave the second 25,534 (65,535 - 40,001).
    kernel, _ = parse_with_lines(TWO_LOOPS)
    buffers = {"out": np.full(16, 0xDEADBEEF, np.uint32)}
    params = {"n": n, "m": m}
    want = interp_run(kernel, dict(buffers), params, (1, 1, 1))["out"]
    assert np.array_equal(want, packed(n, m))
    got = gpu_run(kernel, dict(buffers), params, (1, 1, 1))["out"]
    if gpu["vendor"] != "llvmpipe" or n + m + 2 <= LLVMPIPE_LOOP_TRIPS:
        assert np.array_equal(got, want)
        return
    c = min(n, LLVMPIPE_LOOP_TRIPS)
    d = max(1, min(m, LLVMPIPE_LOOP_TRIPS - (n + 1)))
    assert np.array_equal(got, packed(c, d)), got


def test_check_notes_loops_llvmpipe_may_end_early(tmp_path, capsys):
    # Data-dependent trip counts: a note on each loop's line; fixed counts over the cap (40,001
    # + 40,002 + 9 trips): a note on the loop that takes the sum past it; fixed and under: none.
    src = tmp_path / "two.wgsl"
    src.write_text(TWO_LOOPS)
    fixed = tmp_path / "fixed.wgsl"
    fixed.write_text(FIXED)
    small = tmp_path / "small.wgsl"
    small.write_text(FIXED.replace("40000u", "4000u"))
    assert cli.main(["check", str(src), str(fixed), str(small)]) == 0
    notes = [line for line in capsys.readouterr().out.splitlines() if "65,535 trips" in line]
    assert [n.split(": llvmpipe")[0] for n in notes] == [
        f"{src}:8: note: a loop whose trip count is not fixed when the shader compiles",
        f"{src}:12: note: a loop whose trip count is not fixed when the shader compiles",
        f"{fixed}:9: note: loops of 80,012 trips in all",
    ], notes
    assert all(n.endswith("[portability]") for n in notes)
    assert llvmpipe_loops(parse_with_lines(FIXED.replace("40000u", "4000u"))[0])[0] == 8012


def test_run_refuses_a_gpu_result_that_may_have_met_the_cap(tmp_path, capsys, gpu):
    # 70,000 trips: on llvmpipe, exit 1 and one line naming the loop that passed the cap
    # (with --backend gpu the interpreter counts them); 60,000 and 5: the GPU's answer.
    src = tmp_path / "two.wgsl"
    src.write_text(TWO_LOOPS)
    np.savez(tmp_path / "in.npz", out=np.full(16, 0xDEADBEEF, np.uint32))
    base = ["run", str(src), "--inputs", str(tmp_path / "in.npz"), "--workgroups", "1,1,1"]
    base += ["--out", str(tmp_path / "o.npz")]
    for backend in ("gpu", "both"):
        code = cli.main(base + ["--backend", backend, "--params", '{"n": 70000, "m": 5}'])
        err = capsys.readouterr().err
        if gpu["vendor"] != "llvmpipe":
            assert code == 0, err
            continue
        assert code == 1 and err.count("\n") == 1, err
        assert err.startswith(f"kvdsl run: {src}:8: the GPU's result may be cut short: "), err
        assert "up to 70,007 loop trips" in err and "--backend interp runs it" in err, err
    assert cli.main(base + ["--backend", "gpu", "--params", '{"n": 60000, "m": 5}']) == 0
    got = np.load(tmp_path / "o.npz")["out"]
    assert np.array_equal(got, packed(60000, 5))
