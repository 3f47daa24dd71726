"""Tint validation of WGSL modules, in one subprocess per batch (see :mod:`tint_worker`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

_WORKER = Path(__file__).with_name("tint_worker.py")


def tint_check(sources: dict[str, str], timeout: float = 300.0) -> dict[str, str | None]:
    """Validate each named WGSL module under Tint; name → Tint's error text, or None if valid.

    Raises :class:`RuntimeError` when the worker cannot run (wgpudawn missing, a crash).
    """
    if not sources:
        return {}
    env = dict(os.environ, WGPU_BACKEND_TYPE="Null")
    proc = subprocess.run(
        [sys.executable, str(_WORKER)],
        input=json.dumps(sources),
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"Tint worker failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    results = json.loads(proc.stdout)
    return {name: results[name] for name in sources}
