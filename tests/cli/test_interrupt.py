"""Ctrl-C: a command ended by SIGINT prints one line, ``kvdsl COMMAND: interrupted``, and exits
with code 130 (128 + SIGINT, as a shell reports a process the signal ended)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.paths import ROOT

#: Runs ``kvdsl.cli.main`` on the arguments after saying ``started``: the signal then reaches the
#: command, not the imports before it.
LAUNCH = (
    "import sys; import kvdsl.cli as cli; print('started', flush=True); "
    "sys.exit(cli.main(sys.argv[1:]))"
)

#: A kernel whose interpretation takes tens of seconds (1.8 million loop trips of 64
#: invocations), each loop under llvmpipe's 65,535 trips.
SLOW = """@group(0) @binding(0) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    var acc = gid.x;
    for (var j = 0u; j < 30u; j++) {
        for (var k = 0u; k < 60000u; k++) {
            acc = acc * 1664525u + 1013904223u;
        }
    }
    out[gid.x] = acc;
}
"""


def _sigint_as_python_sets_it() -> None:
    # A process started in the background of a shell ignores SIGINT, and its children inherit
    # that; the command under test gets the default, as one started from a terminal does.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interrupt(argv: list[str], ready: str, settle: float) -> tuple[int, str, float]:
    """Start ``kvdsl ARGV``, wait for a stdout line starting with ``ready`` and ``settle`` seconds
    more, send SIGINT; (exit code, stderr, seconds from start to exit)."""
    started = time.monotonic()
    child = subprocess.Popen(
        [sys.executable, "-c", LAUNCH, *argv],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
        preexec_fn=_sigint_as_python_sets_it,
    )
    try:
        for line in child.stdout:
            if line.startswith(ready):
                break
        else:
            pytest.fail(f"kvdsl {' '.join(argv)} ended before {ready!r}: {child.stderr.read()}")
        time.sleep(settle)
        assert child.poll() is None, "the command ended before the signal: make it longer"
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return child.returncode, err, time.monotonic() - started


def test_run_interrupted(tmp_path: Path) -> None:
    kernel = tmp_path / "slow.wgsl"
    kernel.write_text(SLOW)
    np.savez(tmp_path / "in.npz", out=np.full(64, 0xDEADBEEF, np.uint32))
    argv = ["run", str(kernel), "--inputs", str(tmp_path / "in.npz"), "--workgroups", "1,1,1"]
    code, err, _ = interrupt(argv + ["--backend", "interp"], "started", 2.0)
    assert (code, err) == (130, "kvdsl run: interrupted\n")


def test_verify_interrupted() -> None:
    argv = ["verify", "merge_llama31_8b", "copy_llama31_8b", "--cases", "1000", "--skip", "gpu"]
    code, err, _ = interrupt(argv, "started", 2.0)
    assert (code, err) == (130, "kvdsl verify: interrupted\n")


def test_session_interrupted() -> None:
    # the header line comes once the session's caches are made, before its first step
    argv = ["session", "--backend", "interp", "--steps", "100000", "--layers", "1", "--batch", "1"]
    argv += ["--kv-heads", "1", "--head-dim", "8"]
    code, err, _ = interrupt(argv, "session decode:", 0.5)
    assert (code, err) == (130, "kvdsl session: interrupted\n")


def test_interrupted_with_traceback_shows_it(tmp_path: Path) -> None:
    """``--traceback`` keeps Python's report of the interrupt, for a developer."""
    argv = ["--traceback", "verify", "merge_llama31_8b", "--cases", "1000", "--skip", "gpu"]
    code, err, _ = interrupt(argv, "started", 2.0)
    assert code != 0 and "KeyboardInterrupt" in err and "Traceback" in err
