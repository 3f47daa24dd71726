"""Every fuzz strategy draws from its choices alone: two runs of the same seed draw the same
examples. A strategy that read outside state (a module-level cache it fills, a global random
generator, the clock, the order of a set or of a folder's files) would draw others, and
hypothesis would stop a run that shrinks or replays one of its examples with
``FlakyStrategyDefinition`` ("data generation depending on external state")."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from tests.emit.test_roundtrip import kernels as round_trip_kernels
from tests.harness.test_fuzz import configs, window_inputs
from tests.helpers.exec_fuzz import kernels as integer_kernels
from tests.interp.test_exec_fuzz_float import kernels as float_kernels
from tests.interp.test_exec_fuzz_workgroup import kernels as workgroup_kernels

STRATEGIES = {
    "configs": configs(),
    "window inputs": window_inputs(),
    "integer kernels": integer_kernels(),
    "float kernels": float_kernels(),
    "workgroup kernels": workgroup_kernels(),
    "round-trip kernels": round_trip_kernels(),
}


def drawn(strategy, n: int = 10) -> list[str]:
    """The first ``n`` examples a derandomized run draws from ``strategy`` (its seed is the
    digest of ``record``, the same each call)."""
    seen: list[str] = []

    @settings(
        max_examples=n,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def record(value) -> None:
        seen.append(repr(value))

    record()
    return seen


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_a_strategy_draws_the_same_examples_from_the_same_seed(name):
    first = drawn(STRATEGIES[name])
    assert len(first) >= 5 and len(set(first)) > 1, first  # examples, and not all one
    assert drawn(STRATEGIES[name]) == first
