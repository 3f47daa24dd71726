"""The adapter offers the features the suite uses, and a kernel the adapter refuses for a
missing feature fails its test (tests/helpers/features.py, tests/conftest.py).

On CI (llvmpipe) the adapter has shader-f16, subgroups and timestamp-query. Losing one would
otherwise let the kernels that need it quietly stop running on the GPU: the harness records
them as ``Result.unsupported`` and ``Result.ok`` looks only at problems.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from kvdsl import catalog
from kvdsl.harness import verify_variant
from tests.helpers import features
from tests.helpers.paths import ROOT

F16_VARIANT = "transpose_f16_llama31_8b"


@pytest.mark.parametrize("feature", features.SUITE_FEATURES)
def test_the_adapter_offers_what_the_suite_uses(gpu, feature):
    from kvdsl.runtime import device

    if feature in features.adapter_features(device.adapter()):
        return
    if feature in features.excused():
        pytest.skip(f"KVDSL_EXCUSE_FEATURES excuses '{feature}': adapter '{gpu['device']}'")
    pytest.fail(features.lacking_message(gpu["device"], [feature]), pytrace=False)


def test_the_guard_names_the_missing_feature(without_feature, monkeypatch):
    from kvdsl.runtime import device

    monkeypatch.delenv("KVDSL_EXCUSE_FEATURES", raising=False)
    without_feature("shader-f16")
    assert features.unexcused_missing(device.adapter()) == ["shader-f16"]
    assert (
        features.unexcused_missing(device.adapter(), {"KVDSL_EXCUSE_FEATURES": "shader-f16"}) == []
    )
    with pytest.raises(pytest.fail.Exception, match="lacks 'shader-f16'"):
        features.suite_feature({"device": "d", "shader_f16": False}, "shader-f16")


def test_a_variant_left_to_the_interpreter_is_not_verified(without_feature, monkeypatch):
    # The check tests/harness/test_catalog.py makes of every variant: ok alone passes here.
    monkeypatch.delenv("KVDSL_EXCUSE_FEATURES", raising=False)
    without_feature("shader-f16")
    name = F16_VARIANT
    result = verify_variant(name, catalog.config(name), catalog.build(name), 1)
    assert result.ok and "shader-f16" in result.unsupported
    with pytest.raises(AssertionError, match="not run on the GPU: .*'shader-f16'"):
        features.assert_ran_on_gpu(result)
    monkeypatch.setenv("KVDSL_EXCUSE_FEATURES", "shader-f16")
    features.assert_ran_on_gpu(result)


PLANTED = """
from kvdsl import catalog
from kvdsl.harness import verify_variant
from kvdsl.runtime import device


class Without:
    def __init__(self, real):
        self.real, self.features = real, set(real.features) - {"shader-f16"}

    def __getattr__(self, name):
        return getattr(self.real, name)


def test_planted(gpu, monkeypatch):
    # The adapter loses shader-f16 behind the test's back; the test looks only at result.ok.
    monkeypatch.setattr(device, "_adapter", Without(device.adapter()))
    monkeypatch.setattr(device, "_devices", {})
    monkeypatch.setattr(device, "_pipelines", {})
    name = "%s"
    result = verify_variant(name, catalog.config(name), catalog.build(name), 1)
    assert result.ok
""" % F16_VARIANT


def _pytest(tmp_path, excuse: str | None) -> subprocess.CompletedProcess:
    (tmp_path / "test_planted.py").write_text(textwrap.dedent(PLANTED))
    env = {k: v for k, v in os.environ.items() if k != "KVDSL_EXCUSE_FEATURES"}
    if excuse is not None:
        env["KVDSL_EXCUSE_FEATURES"] = excuse
    command = [sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml")]
    command += ["--rootdir", str(ROOT), "-p", "no:cacheprovider", "-p", "tests.conftest"]
    command += [str(tmp_path / "test_planted.py")]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_a_kernel_refused_for_a_missing_feature_fails_its_test(gpu, tmp_path):
    run = _pytest(tmp_path, None)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "kernels refused by the adapter" in run.stdout, run.stdout
    assert "lacks 'shader-f16'" in run.stdout, run.stdout
    excused = _pytest(tmp_path, "shader-f16")
    assert excused.returncode == 0, excused.stdout + excused.stderr
    assert "KVDSL_EXCUSE_FEATURES excuses 'shader-f16': 1 tests met" in excused.stdout
