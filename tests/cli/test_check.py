"""``kvdsl check`` under the limits a file states or the options give, and without Tint."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from kvdsl.cli.check import NOT_RUN
from tests.helpers.paths import ROOT

EMITTED = ROOT / "emitted"
DROP_INS = sorted(EMITTED.glob("*_template_bindings_*.wgsl"))
LIMITS_LINE = "// limits past WebGPU's defaults, to request of the device: "


def check(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kvdsl", "check", *args],
        cwd=ROOT, capture_output=True, text=True, env=env,
    )  # fmt: skip


def unstated(tmp: Path, source: Path) -> Path:
    """``source`` without its limits line: a file from elsewhere, binding as many buffers."""
    text = "".join(
        line for line in source.read_text().splitlines(True) if not line.startswith(LIMITS_LINE)
    )
    out = tmp / source.name
    out.write_text(text)
    return out


def test_kvdsl_drop_ins_pass_under_the_limits_they_state():
    assert len(DROP_INS) == 4
    for path in DROP_INS:
        assert LIMITS_LINE in path.read_text()
    out = check(*map(str, DROP_INS), str(EMITTED / "copy_llama31_8b.wgsl"))
    assert out.returncode == 0 and out.stdout.endswith("5 passed, 0 failed\n"), out.stdout
    assert out.stderr == ""


def test_a_foreign_file_is_checked_at_the_defaults_or_the_option(tmp_path):
    ten = unstated(tmp_path, next(p for p in DROP_INS if p.name.startswith("append_quant")))
    nine = unstated(tmp_path, next(p for p in DROP_INS if p.name.startswith("build_quant")))
    out = check(str(ten), str(nine))
    assert out.returncode == 1 and out.stdout.endswith("0 passed, 2 failed\n")
    assert "count was 10" in out.stdout and "storage buffers (9)" in out.stdout
    out = check(str(ten), str(nine), "--max-storage-buffers", "9")
    assert out.returncode == 1 and out.stdout.endswith("1 passed, 1 failed\n")
    assert "count was 10" in out.stdout and "(9)" not in out.stdout
    out = check(str(ten), str(nine), "--max-storage-buffers", "10")
    assert out.returncode == 0 and out.stdout.endswith("2 passed, 0 failed\n"), out.stdout


def test_bad_limits_are_one_line(tmp_path):
    for value in ("7", "x", "-1", "8.5"):
        out = check(str(DROP_INS[0]), "--max-storage-buffers", value)
        assert out.returncode == 2 and out.stdout == ""
        first, hint = out.stderr.splitlines()
        assert first == (
            f"kvdsl check: error: argument --max-storage-buffers: {value!r}: expected a whole "
            "number, 8 or more: the device's maxStorageBuffersPerShaderStage (WebGPU guarantees 8)"
        )
        assert hint == "kvdsl check: see 'kvdsl check --help' for the options"
    bad = tmp_path / "bad.wgsl"
    text = (EMITTED / "copy_llama31_8b.wgsl").read_text()
    for stated in ('{"maxStorageBuffersPerShaderStage": "ten"}', '{"maxBogus": 9}', "[10"):
        bad.write_text(LIMITS_LINE + stated + "\n" + text)
        out = check(str(bad))
        assert out.returncode == 1 and out.stdout.endswith("0 passed, 1 failed\n")
        assert out.stdout.startswith(f"{bad}:1: the limits line states {stated!r}: expected")


def test_tint_missing_is_one_line(tmp_path):
    """Without the wgpudawn package the check says in one line that Tint did not run; kvdsl's
    and naga's verdicts stand."""
    fake = tmp_path / "wgpudawn"
    fake.mkdir()
    (fake / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'wgpudawn'\", name='wgpudawn')\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]))
    out = check(str(EMITTED / "copy_llama31_8b.wgsl"), env=env)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    path = EMITTED / "copy_llama31_8b.wgsl"
    assert out.stdout.splitlines() == [
        "note: Tint did not run: the wgpudawn package is not installed (kvdsl depends on it: "
        "pip install wgpudawn) [tint]",
        f"{path}: passed: checked by kvdsl's parser and verifier and naga (wgpu-native); not by "
        "Tint (Dawn)",
        NOT_RUN,
        "1 passed, 0 failed",
    ]
