"""docs/authoring.md stays true: its code blocks run, in order, in one process of their own (they
add a mode to the catalog's tables, which no other test may see)."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.helpers.paths import ROOT

GUIDE = (ROOT / "docs" / "authoring.md").read_text()


def test_the_guides_code_runs(gpu, tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", GUIDE, re.S)
    assert len(blocks) >= 8
    script = tmp_path / "authoring.py"
    script.write_text("\n".join(blocks))
    out = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-3000:]
    # What the blocks print: the refusal of a short buffer, the race, the read past the end,
    # the verification's verdict.
    assert "holds 1152 elements, but kernel scale_rows touches 1280" in out.stdout
    assert "total[0]: invocation gid=(0, 0, 0)" in out.stdout and "writes it" in out.stdout
    assert "src[64] is out of bounds (length 64)" in out.stdout
    assert "1 passed, 0 failed" in out.stdout
    assert (tmp_path / "scale_llama31_8b.npz").is_file()


def test_the_guide_names_what_exists():
    """The functions and files the guide names are there."""
    import kvdsl.ir

    for name in ("largest", "with_contract", "KernelBuilder"):
        assert f"kvdsl.ir.{name}" in GUIDE or f"`{name}(" in GUIDE, name
        assert hasattr(kvdsl.ir, name), name
    for path in re.findall(r"`(kvdsl/[\w/]+\.py)`", GUIDE):
        if "scale" not in path:  # the file the guide has the reader write
            assert (ROOT / path).is_file(), path
