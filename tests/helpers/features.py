"""The adapter features the suite needs, and what a test may do without them.

The suite runs kernels that enable ``f16`` and ``subgroups`` and times with ``timestamp-query``.
An adapter without one of them makes ``kvdsl.runtime`` refuse those kernels with a
:class:`~kvdsl.runtime.FeatureError` (the harness records it as ``Result.unsupported``): work that
quietly stops running on the GPU. So a refusal fails the test (tests/conftest.py), unless

- the test took the feature away itself (the ``without_feature`` fixture), or
- ``KVDSL_EXCUSE_FEATURES`` names it (``KVDSL_EXCUSE_FEATURES=shader-f16`` where a developer's
  adapter legitimately lacks it: Dawn on NVIDIA's Vulkan driver has no ``shader-f16``); the
  excuse is printed in the run's summary.

``tests/runtime/test_adapter_features.py`` checks that the adapter offers every feature here.
"""

from __future__ import annotations

import os
import re

#: What the suite uses: WGSL's ``enable f16;`` and ``enable subgroups;``, and GPU timestamps.
SUITE_FEATURES = ("shader-f16", "subgroups", "timestamp-query")

#: WebGPU's names for what wgpu-native 0.32 calls otherwise.
_ALIASES = {"subgroup": "subgroups", "f16": "shader-f16"}


def canonical(feature: str) -> str:
    """``feature`` by its WebGPU name (``subgroup`` → ``subgroups``, ``f16`` → ``shader-f16``)."""
    return _ALIASES.get(feature.strip(), feature.strip())


def excused(environ=os.environ) -> frozenset[str]:
    """The features ``KVDSL_EXCUSE_FEATURES`` (comma- or space-separated) excuses."""
    names = re.split(r"[,\s]+", environ.get("KVDSL_EXCUSE_FEATURES", ""))
    return frozenset(canonical(n) for n in names if n)


def adapter_features(adapter) -> frozenset[str]:
    """The adapter's features by their WebGPU names."""
    return frozenset(canonical(f) for f in adapter.features)


def refused_feature(err: Exception) -> str:
    """The feature a :class:`~kvdsl.runtime.FeatureError` says the adapter lacks."""
    found = re.search(r"has no '([^']+)' feature", str(err))
    return canonical(found.group(1)) if found else str(err)


def suite_feature(gpu: dict, feature: str) -> bool:
    """Whether a test should use ``feature``: True where the adapter has it, False where it lacks
    it and ``KVDSL_EXCUSE_FEATURES`` excuses it; otherwise the test fails, naming it."""
    import pytest

    key = {"shader-f16": "shader_f16", "subgroups": "subgroups"}.get(feature, "timestamp_query")
    if gpu[key]:
        return True
    if canonical(feature) in excused():
        return False
    pytest.fail(lacking_message(gpu["device"], [feature]), pytrace=False)


def lacking_message(device: str, features) -> str:
    names = ", ".join(f"'{f}'" for f in sorted(set(features)))
    return (
        f"the adapter '{device}' lacks {names}, which the suite needs: kernels that enable it "
        "would not run on the GPU (KVDSL_EXCUSE_FEATURES="
        + ",".join(sorted(set(features)))
        + " excuses it where an adapter legitimately lacks it)"
    )


def assert_ran_on_gpu(result) -> None:
    """A harness result (``verify_variant``) is ok and its GPU cases ran, unless the feature that
    kept them off the GPU is excused."""
    assert result.ok, "\n".join(result.problems)
    if result.unsupported is not None:
        feature = refused_feature(Exception(result.unsupported))
        assert feature in excused(), f"{result.variant}: not run on the GPU: {result.unsupported}"


def allow_refusal(err: Exception) -> None:
    """A test met ``err`` (a :class:`~kvdsl.runtime.FeatureError`): fine only where
    ``KVDSL_EXCUSE_FEATURES`` excuses the feature it names."""
    feature = refused_feature(err)
    assert feature in excused(), f"not run on the GPU: {err}"


def unexcused_missing(adapter, environ=os.environ) -> list[str]:
    """The features of :data:`SUITE_FEATURES` the adapter lacks and nothing excuses."""
    have, ok = adapter_features(adapter), excused(environ)
    return [f for f in SUITE_FEATURES if f not in have and f not in ok]
