"""Tint validation of WGSL modules, in one subprocess per batch (see :mod:`tint_worker`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

_WORKER = Path(__file__).with_name("tint_worker.py")


def tint_check(
    sources: dict[str, str],
    timeout: float = 300.0,
    limits: dict[str, dict[str, int]] | None = None,
) -> dict[str, str | None]:
    """Validate each named WGSL module under Tint; name → Tint's error text, or None if valid.

    ``limits`` maps a module's name to the limits it needs past WebGPU's defaults (JavaScript
    names, :func:`kvdsl.ir.features.limits`); it is checked on a device requesting them, every
    other module on a device at the defaults.
    Raises :class:`RuntimeError` when the worker cannot run (wgpudawn missing, a crash).
    """
    from kvdsl.runtime.device import limit_name

    if not sources:
        return {}
    need = {
        name: {limit_name(k): n for k, n in wanted.items()}
        for name, wanted in (limits or {}).items()
        if wanted
    }
    env = dict(os.environ, WGPU_BACKEND_TYPE="Null")
    proc = subprocess.run(
        [sys.executable, str(_WORKER)],
        input=json.dumps({"sources": sources, "limits": need}),
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"Tint worker failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    results = json.loads(proc.stdout)
    return {name: results[name] for name in sources}
