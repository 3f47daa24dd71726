"""The stateful fuzz: random interleavings of prefill, decode, merge, shift and read on a small
cache in a random format, on the interpreter and on the GPU, each step checked against the
oracle (every element, and the canaries around the cache); hypothesis shrinks a failure to the
shortest sequence of operations that shows it.

``KVDSL_SESSION_STEPS`` sets the interpreter's budget of steps (the GPU runs a tenth of it);
the summary line counts the steps that ran (tests/session/conftest.py).
"""

from __future__ import annotations

import os

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kvdsl.session import GpuHost, InterpHost, Session, SessionMismatch, Spec
from tests.helpers import session as tally

#: Steps the interpreter fuzz runs at least (the GPU's: a tenth).
STEPS = int(os.environ.get("KVDSL_SESSION_STEPS", "10000"))
#: Steps per drawn session at most: long enough to fill and overrun a small cache.
PER_SESSION = 40

#: Every format; the float ones drawn three times as often, since the dense formats' kernels
#: take the interpreter several times as long per step.
FORMATS = ("f32", "f16") * 3 + ("int8", "int4", "int4_asym", "q8_0", "q4_0")
FORMATS += ("template_int8", "template_int4")


def _machine(host_kind: str, target: int, counted: bool = True):
    count = tally.count if counted else (lambda host, steps: None)

    class CacheSession(RuleBasedStateMachine):
        """One session: a random spec, then random operations, each checked."""

        @initialize(
            fmt=st.sampled_from(FORMATS),
            batch=st.integers(1, 3),
            heads=st.integers(1, 2),
            capacity=st.integers(1, 12),
            layers=st.sampled_from((1, 1, 1, 2)),
            seed=st.integers(0, 2**16),
        )
        def start(self, fmt, batch, heads, capacity, layers, seed):
            head_dim = 32 if fmt in ("q8_0", "q4_0") else 8
            spec = Spec(layers, batch, heads, head_dim, capacity, fmt)
            host = InterpHost() if host_kind == "interp" else GpuHost()
            self.session = Session(spec, host, seed=seed)
            count(host_kind, 0)

        @rule(data=st.data())
        def prefill(self, data):
            s = self.session.spec
            lengths = data.draw(
                st.lists(st.integers(0, s.capacity), min_size=s.batch, max_size=s.batch)
            )
            self.session.prefill(lengths)
            count(host_kind, 1)

        @rule()
        def decode(self):
            self.session.decode()
            count(host_kind, 1)

        @rule(data=st.data())
        def merge(self, data):
            self.session.merge(data.draw(st.integers(1, self.session.spec.capacity)))
            count(host_kind, 1)

        @precondition(lambda self: self.session.fmt.shifts)
        @rule(data=st.data())
        def shift(self, data):
            self.session.shift(data.draw(st.integers(1, self.session.spec.capacity)))
            count(host_kind, 1)

        @rule()
        def read(self):
            self.session.read()
            count(host_kind, 1)

        @invariant()
        def checked_after_every_step(self):
            # Session.check ran after each operation (check_every): one per step.
            assert self.session.checks == len(self.session.steps)

    CacheSession.TestCase.settings = settings(
        # A round draws about a fifth of the target (sessions run about 34 steps each), so the
        # rounds stop within a fifth past it.
        max_examples=max(1, target // (5 * 34)),
        stateful_step_count=PER_SESSION,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=False,
    )
    return CacheSession


def _run_until(host_kind: str, target: int) -> None:
    """Run rounds of drawn sessions until ``target`` steps have run on ``host_kind``."""
    machine = _machine(host_kind, target)
    while tally.STEPS[host_kind] < target:
        machine.TestCase("runTest").runTest()


def test_interpreter_sessions_match_the_oracle():
    _run_until("interp", STEPS)


def test_gpu_sessions_match_the_oracle(gpu):
    _run_until("gpu", STEPS // 10)


def test_the_fuzz_finds_a_row_appended_late_and_shrinks_it(monkeypatch):
    """A float append landing one row late (seqlens_k one too many) is found, and shrunk to a
    session of one step."""
    from kvdsl.session.formats import FloatFormat

    real = FloatFormat.append

    def late(self, host, cache, new, inputs, lens, key_seq, cap):
        host.write(inputs["seqlens_k"].buffer, 0, np.asarray(lens + 1, np.int32))
        real(self, host, cache, new, inputs, lens + 1, key_seq, cap)

    monkeypatch.setattr(FloatFormat, "append", late)
    machine = _machine("interp", 5000, counted=False)  # 29 sessions at most
    with pytest.raises(SessionMismatch, match=r"^after step 0, (decode|prefill)"):
        machine.TestCase("runTest").runTest()
