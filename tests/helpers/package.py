"""``emitted/`` as the npm package a runtime installs: packed with ``npm pack`` and installed from
the tarball into a temporary project (``tests/conftest.py``'s ``kvdsl_package`` fixture, once a
session), so the Node and browser tests load what a runtime gets, not the source folder.

The Node tools the tests run (``tsc`` and ``ajv``) come from ``tests/node``, which
``scripts/setup.sh`` installs with ``npm ci`` from its lockfile.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.paths import ROOT

EMITTED = ROOT / "emitted"
#: The tests' Node project: package.json, package-lock.json, the scripts and their node_modules.
NODE = ROOT / "tests" / "node"


class NodeMissing(Exception):
    """A Node.js tool the tests need is not installed, in one line."""


def tool(name: str) -> str:
    """The executable ``node`` or ``npm``; raises :class:`NodeMissing` naming the fix."""
    found = shutil.which(name)
    if found is None:
        raise NodeMissing(f"the tests need {name} (Node.js): bash scripts/setup.sh installs it")
    return found


def node_module(name: str) -> Path:
    """``tests/node/node_modules/<name>``; raises :class:`NodeMissing` when npm ci has not run."""
    path = NODE / "node_modules" / name
    if not (path / "package.json").is_file():
        raise NodeMissing(
            f"the tests need the npm package {name} in tests/node/node_modules: "
            "bash scripts/setup.sh runs npm ci there"
        )
    return path


def npm(*args: str, cwd: Path, timeout: float = 120) -> str:
    """Run ``npm ARGS`` in ``cwd`` offline-tolerantly (no audit, no funding notice); its stdout,
    or an AssertionError with its stderr's tail."""
    proc = subprocess.run(
        [tool("npm"), *args, "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, f"npm {' '.join(args)}: {proc.stderr[-2000:]}"
    return proc.stdout


def packed_files(folder: Path = EMITTED) -> list[str]:
    """The paths ``npm pack --dry-run`` would put in the package of ``folder``, sorted."""
    listing = json.loads(npm("pack", "--dry-run", "--json", cwd=folder))
    return sorted(f["path"] for f in listing[0]["files"])


@dataclass(frozen=True)
class Installed:
    """The package, packed and installed into a temporary project: ``project`` holds
    ``node_modules/kvdsl`` (``package``), unpacked from ``tarball``."""

    tarball: Path
    project: Path

    @property
    def package(self) -> Path:
        return self.project / "node_modules" / "kvdsl"


def pack_and_install(tmp: Path, folder: Path = EMITTED) -> Installed:
    """Pack ``folder`` into ``tmp`` and install the tarball into the project ``tmp/project``
    (the package has no dependencies, so nothing is fetched)."""
    listing = json.loads(npm("pack", "--json", "--pack-destination", str(tmp), cwd=folder))
    tarball = tmp / listing[0]["filename"]
    project = tmp / "project"
    project.mkdir()
    (project / "package.json").write_text(
        json.dumps({"name": "kvdsl-host", "private": True, "type": "module"}) + "\n"
    )
    npm("install", "--offline", "--ignore-scripts", str(tarball), cwd=project)
    return Installed(tarball, project)


#: The TypeScript host's compiler options: strict, resolving "kvdsl" through the package's
#: "exports" and "types" as Node.js does, with no ambient types (no DOM, no @types/node).
TSCONFIG = {
    "compilerOptions": {
        "strict": True,
        "module": "nodenext",
        "moduleResolution": "nodenext",
        "target": "es2022",
        "lib": ["es2022"],
        "types": [],
    },
    "files": ["host.ts"],
}


def run(args: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``args`` (a Node.js command line: ``node`` is looked up) in ``cwd``, text captured."""
    if args[0] == "node":
        args = [tool("node"), *args[1:]]
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def tsc(project: Path, *args: str) -> subprocess.CompletedProcess:
    """``tsc -p PROJECT ARGS`` (tests/node's TypeScript) on ``host.ts`` copied into ``project``
    with :data:`TSCONFIG`."""
    shutil.copy(NODE / "host.ts", project)
    (project / "tsconfig.json").write_text(json.dumps(TSCONFIG, indent=2) + "\n")
    compiler = node_module("typescript") / "bin" / "tsc"
    return run(["node", str(compiler), "-p", ".", *args], cwd=project)
