"""Shared fixtures. GPU tests really run: no wgpu adapter is a failure, never a skip."""

from __future__ import annotations

import os
import tempfile

import pytest

# Mesa's Vulkan drivers need a runtime dir; CI containers often have none.
os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.gettempdir())


@pytest.fixture(scope="session")
def gpu() -> dict:
    """The wgpu adapter's description (kvdsl.runtime.adapter_info()); fails if there is none."""
    from kvdsl.runtime import DeviceError, adapter_info

    try:
        return adapter_info()
    except DeviceError as e:
        pytest.fail(f"GPU tests need a wgpu adapter (llvmpipe will do): {e}", pytrace=False)


def pytest_terminal_summary(terminalreporter) -> None:
    """Print the legacy-parity tally (tests/test_parity.py) at the end of every run."""
    import sys

    parity = sys.modules.get("test_parity") or sys.modules.get("tests.test_parity")
    counts = getattr(parity, "COUNTS", None)
    if counts:
        tally = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        terminalreporter.write_line(
            f"legacy parity: {sum(counts.values())} template configurations tried: {tally}"
        )
