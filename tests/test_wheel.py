"""kvdsl as a user installs it: built as a wheel (``pip wheel``, from a copy of the sources a
source distribution carries: ``kvdsl/``, ``pyproject.toml``, ``README.md``), installed into a fresh
venv outside the checkout, its ``kvdsl`` command run from a folder outside the checkout:
``list``, ``emit --out`` (equal to the committed ``emitted/``), ``verify`` and ``check``.

The venv takes kvdsl from the wheel alone. Its dependencies are this interpreter's installed ones,
named by a ``.pth`` file (their folders only: no ``.pth`` of theirs runs, so an editable kvdsl
there stays out), which keeps the test offline and fast; the wheel's own dependency list is
checked against pyproject.toml's.
"""

from __future__ import annotations

import email
import importlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from kvdsl import catalog
from tests.helpers.paths import ROOT

pytestmark = pytest.mark.wheel

#: The modules kvdsl imports from its dependencies (pyproject.toml's), whose folders the venv reads.
DEPENDENCIES = ("lark", "numpy", "wgpu", "jsonschema")
#: A variant verify runs quickly on llvmpipe.
VARIANT = "copy_llama31_8b"


def _run(
    args: list[str | Path], cwd: Path, timeout: float = 120, outside: bool = True
) -> subprocess.CompletedProcess:
    """Run ``args`` in ``cwd``; ``outside``: without ``PYTHONPATH`` (which may name the
    checkout), as a user's shell runs the installed command."""
    env = dict(os.environ)
    if outside:
        env = {k: v for k, v in env.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    proc = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, f"{args}: {proc.stdout[-2000:]}{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path, Path]:
    """The venv's ``bin`` folder, a working folder outside the checkout and the wheel."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "kvdsl", source / "kvdsl", ignore=skip)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source)
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    _run([*build, "--no-index", "-q", "-w", tmp / "dist", source], tmp, 180, outside=False)
    (wheel,) = (tmp / "dist").glob("kvdsl-*.whl")
    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=tmp)
    python = venv / "bin" / "python"
    install = [sys.executable, "-m", "pip", "--python", python, "install", "--no-deps"]
    _run([*install, "--no-index", "-q", wheel], cwd=tmp)
    purelib = _run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], tmp)
    folders = {str(Path(importlib.import_module(m).__file__).parents[1]) for m in DEPENDENCIES}
    folders.add(sysconfig.get_path("platlib"))
    Path(purelib.stdout.strip(), "kvdsl_test_dependencies.pth").write_text(
        "\n".join(sorted(folders)) + "\n"
    )
    work = tmp / "work"
    work.mkdir()
    return venv / "bin", work, wheel


def test_the_wheel_carries_the_package_and_its_metadata(installed):
    bin_, work, wheel = installed
    names = zipfile.ZipFile(wheel).namelist()
    for data in ("kvdsl/frontend/wgsl.lark", "kvdsl/contract/index.schema.json", "kvdsl/py.typed"):
        assert data in names, data
    assert not [n for n in names if n.startswith(("tests/", "emitted/", "benchmarks/"))]
    (meta,) = [n for n in names if n.endswith(".dist-info/METADATA")]
    requires = email.message_from_bytes(zipfile.ZipFile(wheel).read(meta)).get_all("Requires-Dist")
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    plain = [r for r in requires if "extra ==" not in r]
    assert sorted(str(Requirement(r)) for r in plain) == sorted(
        str(Requirement(r)) for r in pyproject["dependencies"]
    )
    where = _run([bin_ / "python", "-c", "import kvdsl; print(kvdsl.__file__)"], work).stdout
    assert Path(where.strip()).is_relative_to(bin_.parent), where
    assert not Path(where.strip()).is_relative_to(ROOT), where


def test_the_installed_command_lists_emits_verifies_and_checks(installed):
    bin_, work, _ = installed
    kvdsl = bin_ / "kvdsl"
    listed = json.loads(_run([kvdsl, "list", "--json"], work).stdout)
    assert list(listed) == list(catalog.VARIANTS)
    assert listed[VARIANT]["mode"] == "copy"
    out = work / "emitted"
    _run([kvdsl, "emit", "--out", out], work)
    committed = sorted(p.name for p in (ROOT / "emitted").iterdir())
    assert sorted(p.name for p in out.iterdir()) == committed
    for name in committed:
        assert (out / name).read_bytes() == (ROOT / "emitted" / name).read_bytes(), name
    verified = _run([kvdsl, "verify", VARIANT, "--cases", "2"], work, timeout=300)
    assert VARIANT in verified.stdout and "1 passed, 0 failed" in verified.stdout, verified.stdout
    shutil.copy(out / f"{VARIANT}.wgsl", work / "kernel.wgsl")
    checked = _run([kvdsl, "check", "kernel.wgsl"], work, timeout=300)
    assert checked.stdout.splitlines()[-1] == "1 passed, 0 failed", checked.stdout
