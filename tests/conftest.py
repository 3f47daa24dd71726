"""Shared fixtures. GPU tests really run: no wgpu adapter is a failure, never a skip."""

from __future__ import annotations

import os
import tempfile

import pytest

from kvdsl.ir.portability import (
    ABS_NOT_NEGATIVE,
    CONSTANT_UNPACK,
    LOOP_SUM_WRAP,
    MAX_OF_ABS,
    SELECT_DIVISOR,
    SELECT_OF_ITS_CONDITION,
    SIGNED_REMAINDER,
)
from kvdsl.runtime import WebGPU, use_webgpu

# Mesa's Vulkan drivers need a runtime dir; CI containers often have none.
os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.gettempdir())

# The suite runs on the WebGPU implementation the KVDSL_* variables name (KVDSL_WEBGPU=dawn
# pytest: the whole suite under Dawn), read here once, as the kvdsl command reads them.
use_webgpu(WebGPU.from_environment(os.environ))


@pytest.fixture(scope="session")
def gpu() -> dict:
    """The wgpu adapter's description (kvdsl.runtime.adapter_info()); fails if there is none."""
    from kvdsl.runtime import DeviceError, adapter_info

    try:
        return adapter_info()
    except DeviceError as e:
        pytest.fail(f"GPU tests need a wgpu adapter (llvmpipe will do): {e}", pytrace=False)


#: What an implementation runs other than WGSL says on some adapter
#: (tests/interp/test_conformance.py and tests/interp/test_exec_fuzz.py on an H200,
#: tests/interp/test_exec_fuzz_float.py on llvmpipe): (implementation, vendor) -> {deviation:
#: why}, the why being kvdsl.ir.portability's (what `kvdsl check` notes). A test meets a
#: deviation only on its platform and says so there (xfail with the reason); everywhere else it
#: holds strictly, and on its platform every other test does.
KNOWN_DEVIATIONS = {
    ("wgpu-native", "NVIDIA"): {
        "i32 %": SIGNED_REMAINDER,
        "i32 abs never negative": ABS_NOT_NEGATIVE,
        "select(a && c, b || c, c)": SELECT_OF_ITS_CONDITION,
        "division by a select of constant vectors": SELECT_DIVISOR,
    },
    ("dawn", "NVIDIA"): {
        "i32 max(a, abs(b))": MAX_OF_ABS,
        "select(a && c, b || c, c)": SELECT_OF_ITS_CONDITION,
        "division by a select of constant vectors": SELECT_DIVISOR,
        "i32 loop sum past its range": LOOP_SUM_WRAP,
    },
    ("wgpu-native", "llvmpipe"): {"constant unpack2x16float": CONSTANT_UNPACK},
}


@pytest.fixture(scope="session")
def deviations(gpu) -> dict[str, str]:
    """This adapter's :data:`KNOWN_DEVIATIONS` (none on llvmpipe)."""
    return KNOWN_DEVIATIONS.get((gpu["implementation"], gpu["vendor"]), {})


@pytest.fixture
def without_feature(gpu, monkeypatch):
    """``without_feature(name)``: from then on the process's adapter lacks the feature ``name``
    (``"shader-f16"``, ``"subgroup"``); devices and pipelines are made anew, as on such a device."""
    from kvdsl.runtime import device

    class Without:
        """The real adapter, minus one feature."""

        def __init__(self, real, feature: str) -> None:
            self.real = real
            # wgpu-native 0.32 names the subgroup feature "subgroup", Dawn "subgroups": either
            # is taken away.
            gone = {"subgroup", "subgroups"} if feature in ("subgroup", "subgroups") else {feature}
            self.features = set(real.features) - gone

        def __getattr__(self, name):
            return getattr(self.real, name)

    def apply(feature: str) -> None:
        monkeypatch.setattr(device, "_adapter", Without(device.adapter(), feature))
        monkeypatch.setattr(device, "_devices", {})
        monkeypatch.setattr(device, "_pipelines", {})

    return apply


def pytest_terminal_summary(terminalreporter) -> None:
    """Print the legacy-parity tally (tests/legacy/test_parity.py) at the end of every run."""
    import sys

    parity = sys.modules.get("test_parity") or sys.modules.get("tests.legacy.test_parity")
    counts = getattr(parity, "COUNTS", None)
    if counts:
        tally = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        terminalreporter.write_line(
            f"legacy parity: {sum(counts.values())} template configurations tried: {tally}"
        )
