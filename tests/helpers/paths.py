"""Where things are for the tests: the repository's root, and the benchmark scripts some tests
import (``benchmarks/`` is a folder of scripts, not a package)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

#: The repository's root: the folder holding ``kvdsl/``, ``tests/``, ``benchmarks/`` and ``docs/``.
ROOT = Path(__file__).resolve().parents[2]
#: The benchmark scripts' folder.
BENCHMARKS = ROOT / "benchmarks"


def benchmark(name: str) -> ModuleType:
    """The script ``benchmarks/<name>.py`` as a module, imported as the scripts import one another
    (their folder first on ``sys.path``, the module named ``name``)."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    return importlib.import_module(name)
