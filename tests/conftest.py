"""Shared fixtures. GPU tests really run: no wgpu adapter is a failure, never a skip; a kernel the
adapter refuses for a missing feature fails its test (tests/helpers/features.py says when not).

Tests that read the legacy template (tests/helpers/legacy.py) form one group: where there is no
template they are skipped, and the summary says so in one line; under KVDSL_REQUIRE_TEMPLATE=1
(CI) they fail instead."""

from __future__ import annotations

import os
import tempfile

import pytest

from kvdsl.ir.portability import (
    ABS_NOT_NEGATIVE,
    BOOL_WORKGROUP,
    CONSTANT_UNPACK,
    PACK_NORM_TIES,
    LOOP_SUM_WRAP,
    MAX_OF_ABS,
    SELECT_DIVISOR,
    SELECT_OF_ITS_CONDITION,
    SIGNED_REMAINDER,
)
from kvdsl.runtime import FeatureError, WebGPU, use_webgpu
from tests.helpers import features, legacy, package

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
        "pack norm ties": PACK_NORM_TIES,
        "bool in workgroup memory": BOOL_WORKGROUP,
    },
    ("dawn", "NVIDIA"): {
        "i32 max(a, abs(b))": MAX_OF_ABS,
        "select(a && c, b || c, c)": SELECT_OF_ITS_CONDITION,
        "division by a select of constant vectors": SELECT_DIVISOR,
        "i32 loop sum past its range": LOOP_SUM_WRAP,
    },
    ("wgpu-native", "llvmpipe"): {
        "constant unpack2x16float": CONSTANT_UNPACK,
        "pack norm ties": PACK_NORM_TIES,
    },
}


@pytest.fixture(scope="session")
def kvdsl_package(tmp_path_factory) -> package.Installed:
    """``emitted/`` packed with npm and installed from the tarball into a temporary project
    (tests/helpers/package.py), once a session: the Node and browser tests load it."""
    try:
        return package.pack_and_install(tmp_path_factory.mktemp("npm"))
    except package.NodeMissing as err:
        missing = str(err)
    pytest.fail(missing, pytrace=False)


@pytest.fixture(scope="session")
def deviations(gpu) -> dict[str, str]:
    """This adapter's :data:`KNOWN_DEVIATIONS` (none where none is known)."""
    return KNOWN_DEVIATIONS.get((gpu["implementation"], gpu["vendor"]), {})


#: Per test: the features it took away (``without_feature``), and those a kernel was refused for.
TAKEN = pytest.StashKey[set]()
REFUSED = pytest.StashKey[list]()
#: Over the run: excused feature -> the tests a kernel of which was refused for it.
EXCUSED_REFUSALS: dict[str, set[str]] = {}


@pytest.fixture(autouse=True)
def _refusals_are_recorded(request, monkeypatch):
    """Every kernel the adapter refuses for a missing feature is recorded on the test; the report
    hook below fails a test whose refusal nothing allows."""
    from kvdsl.runtime import device

    real = device.device
    refused = request.node.stash.setdefault(REFUSED, [])

    def watched(*args, **kwargs):
        try:
            return real(*args, **kwargs)
        except FeatureError as err:
            refused.append(features.refused_feature(err))
            raise

    monkeypatch.setattr(device, "device", watched)


def pytest_collection_modifyitems(config, items) -> None:
    """Skip the tests marked ``long`` unless the run's ``-m`` names that marker."""
    if "long" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="a long run: select it with -m long")
    for item in items:
        if "long" in item.keywords:
            item.add_marker(skip)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A passing test that met a kernel refused for a feature the test did not take away and
    KVDSL_EXCUSE_FEATURES does not excuse fails: the kernel never ran on the GPU."""
    outcome = yield
    report = outcome.get_result()
    if call.when != "call" or not report.passed:
        return
    taken, excused = item.stash.get(TAKEN, set()), features.excused()
    refused = [f for f in item.stash.get(REFUSED, []) if f not in taken]
    for feature in refused:
        if feature in excused:
            EXCUSED_REFUSALS.setdefault(feature, set()).add(item.nodeid)
    unexcused = [f for f in refused if f not in excused]
    if unexcused:
        from kvdsl.runtime import adapter_info

        report.outcome = "failed"
        report.longrepr = "kernels refused by the adapter: " + features.lacking_message(
            adapter_info()["device"], unexcused
        )


@pytest.fixture
def legacy_template():
    """The legacy template's path; the test is skipped as one of the legacy template group where
    there is none (or fails, under KVDSL_REQUIRE_TEMPLATE)."""
    return legacy.require_template()


@pytest.fixture
def without_feature(gpu, monkeypatch, request):
    """``without_feature(name)``: from then on the process's adapter lacks the feature ``name``
    (``"shader-f16"``, ``"subgroup"``); devices and pipelines are made anew, as on such a device.
    Kernels refused for it do not fail the test."""
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
        request.node.stash.setdefault(TAKEN, set()).add(features.canonical(feature))
        monkeypatch.setattr(device, "_adapter", Without(device.adapter(), feature))
        monkeypatch.setattr(device, "_devices", {})
        monkeypatch.setattr(device, "_pipelines", {})

    return apply


def pytest_terminal_summary(terminalreporter) -> None:
    """At the end of every run: the legacy template group's tests not run (one line, if any),
    the features KVDSL_EXCUSE_FEATURES excused, and the legacy-parity tally
    (tests/legacy/test_parity.py)."""
    import sys

    prefix = f"Skipped: {legacy.GROUP}: "
    reasons = [
        r.longrepr[2][len(prefix) :]
        for r in terminalreporter.stats.get("skipped", [])
        if isinstance(r.longrepr, tuple) and str(r.longrepr[2]).startswith(prefix)
    ]
    if reasons:
        terminalreporter.write_line(
            f"{legacy.GROUP}: {len(reasons)} tests not run: {sorted(set(reasons))[0]}"
        )
    for feature in sorted(features.excused()):
        met = EXCUSED_REFUSALS.get(feature, set())
        terminalreporter.write_line(
            f"KVDSL_EXCUSE_FEATURES excuses '{feature}': {len(met)} tests met kernels the "
            "adapter refused for it"
        )

    parity = sys.modules.get("test_parity") or sys.modules.get("tests.legacy.test_parity")
    counts = getattr(parity, "COUNTS", None)
    if counts:
        tally = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        terminalreporter.write_line(
            f"legacy parity: {sum(counts.values())} template configurations tried: {tally}"
        )
