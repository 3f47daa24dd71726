"""The stateful fuzz: random interleavings of prefill, decode, merge, shift, fork and read on a
small contiguous cache in a random format, and of prefill, decode, extend, fork (copy-on-write),
compaction, sliding windows and read on a small paged cache (page table or slot mapping, NHD or
HND, f32, f16 or a dense format), on the interpreter and on the GPU, each step checked against
the oracle (every element, every page no sequence owns, and the canaries around each buffer);
in one session in four, every decode is followed by attention over every layer's cache, checked
against float64 attention over the oracle's rows (kvdsl.session.attention); hypothesis shrinks a
failure to the shortest sequence of operations that shows it.

``KVDSL_SESSION_STEPS`` sets the interpreter's budget of steps (the GPU runs a tenth of it):
seven tenths of it contiguous, three tenths paged; the summary line counts the steps that ran
(tests/session/conftest.py).
"""

from __future__ import annotations

import dataclasses
import math
import os

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kvdsl.session import GpuHost, InterpHost, PagedSession, PagedSpec, Session, SessionMismatch
from kvdsl.session import Spec, cache_format
from tests.helpers import session as tally
from tests.helpers.fuzz import database

#: Steps the interpreter fuzz runs at least (the GPU's: a tenth), over both machines.
STEPS = int(os.environ.get("KVDSL_SESSION_STEPS", "10000"))
#: The paged machine's share of them.
PAGED_STEPS = STEPS * 3 // 10
#: Steps per drawn session at most: long enough to fill and overrun a small cache.
PER_SESSION = 40

#: Every format; the float ones drawn three times as often, since the dense formats' kernels
#: take the interpreter several times as long per step.
FORMATS = ("f32", "f16") * 3 + ("int8", "int4", "int4_asym", "q8_0", "q4_0", "ort_q4")
FORMATS += ("template_int8", "template_int4")
#: Query heads per KV head attending after each decode (kvdsl.session.attention), 0 for none:
#: one session in four attends (a decode's attention takes the interpreter some thirty times
#: a decode's time).
GROUPS = (0, 0, 0, 0, 0, 0, 1, 2)


def _lengths(data, spec) -> list[int]:
    """A prefill's drawn lengths: one a sequence, each up to the capacity."""
    return data.draw(
        st.lists(st.integers(0, spec.capacity), min_size=spec.batch, max_size=spec.batch)
    )


def _fork_pair(data, batch: int) -> tuple[int, int]:
    """A fork's drawn source and destination: two different sequences."""
    src = data.draw(st.integers(0, batch - 1))
    dst = data.draw(st.integers(0, batch - 2))
    return src, dst + (dst >= src)


def _machine(host_kind: str, target: int, counted: bool = True, narrow: bool = False):
    """The contiguous machine; ``narrow``: one small f32 geometry (a shrink has less to try)."""
    count = tally.count if counted else (lambda host, steps: None)

    class CacheSession(RuleBasedStateMachine):
        """One session: a random spec, then random operations, each checked."""

        @initialize(
            fmt=st.just("f32") if narrow else st.sampled_from(FORMATS),
            batch=st.just(2) if narrow else st.integers(1, 3),
            heads=st.just(1) if narrow else st.integers(1, 2),
            capacity=st.just(8) if narrow else st.integers(1, 12),
            # Half the sessions get the least capacity at which a sequence's rows are a
            # multiple of 256 bytes, which fork needs (else it is refused).
            aligned=st.just(False) if narrow else st.booleans(),
            layers=st.just(1) if narrow else st.sampled_from((1, 1, 1, 2)),
            seed=st.just(0) if narrow else st.integers(0, 2**16),
            group=st.just(0) if narrow else st.sampled_from(GROUPS),
        )
        def start(self, fmt, batch, heads, capacity, aligned, layers, seed, group):
            head_dim = 32 if fmt in ("q8_0", "q4_0") else 8
            if aligned:
                row = heads * cache_format(fmt, heads, head_dim).row_bytes
                capacity = 256 // math.gcd(256, row)
            spec = Spec(layers, batch, heads, head_dim, capacity, fmt)
            host = InterpHost() if host_kind == "interp" else GpuHost()
            self.session = Session(spec, host, seed=seed, q_heads=group * heads)
            row = heads * capacity * self.session.fmt.row_bytes
            self.session.forkable = row % 256 == 0  # else fork is refused (SessionError)
            count(host_kind, 0)

        @rule(data=st.data())
        def prefill(self, data):
            self.session.prefill(_lengths(data, self.session.spec))
            count(host_kind, 1)

        @rule()
        def decode(self):
            self.session.decode()
            count(host_kind, 1 + (self.session.attention is not None))  # decode, attend

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

        @precondition(lambda self: self.session.spec.batch > 1 and self.session.forkable)
        @rule(data=st.data())
        def fork(self, data):
            self.session.fork(*_fork_pair(data, self.session.spec.batch))
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
        # The narrow machines fail on purpose (the shrink tests): derandomized, they shrink to
        # the same session on every run; they share the broad ones' database key: theirs keep
        # nothing.
        derandomize=narrow,
        database=None if narrow else database(),
    )
    return CacheSession


#: The paged formats: the float ones drawn twice as often as the dense ones.
PAGED_FORMATS = ("f32", "f16") * 2 + ("int8", "int4", "q8_0", "ort_q4")


def _paged_machine(host_kind: str, target: int, counted: bool = True, narrow: bool = False):
    """The paged machine; ``narrow``: one small f32 geometry and only prefill, decode and
    fork (a shrink has less to try)."""
    key = f"paged-{host_kind}"
    count = (lambda steps: tally.count(key, steps)) if counted else (lambda steps: None)

    class PagedCacheSession(RuleBasedStateMachine):
        """One paged session: a random spec, then random operations, each checked; the
        preconditions keep each sequence inside its page table (the host refuses more)."""

        @initialize(
            fmt=st.just("f32") if narrow else st.sampled_from(PAGED_FORMATS),
            batch=st.just(2) if narrow else st.integers(1, 3),
            heads=st.just(1) if narrow else st.integers(1, 2),
            max_pages=st.just(2) if narrow else st.integers(1, 3),
            layout=st.just("nhd") if narrow else st.sampled_from(("nhd", "hnd")),
            addressing=st.sampled_from(("page_table", "slot_mapping")[: 1 if narrow else 2]),
            layers=st.just(1) if narrow else st.sampled_from((1, 1, 2)),
            seed=st.just(0) if narrow else st.integers(0, 2**16),
            group=st.just(0) if narrow else st.sampled_from(GROUPS),
        )
        def start(self, fmt, batch, heads, max_pages, layout, addressing, layers, seed, group):
            head_dim = 32 if fmt == "q8_0" else 8
            spec = PagedSpec(
                layers, batch, heads, head_dim, 16, max_pages, 0, layout, addressing, fmt
            )
            host = InterpHost() if host_kind == "interp" else GpuHost()
            self.session = PagedSession(spec, host, seed=seed, q_heads=group * heads)
            count(0)

        def room(self) -> int:
            s = self.session
            return s.spec.capacity - int(s.lengths.max())

        @rule(data=st.data())
        def prefill(self, data):
            self.session.prefill(_lengths(data, self.session.spec))
            count(1)

        @precondition(lambda self: self.room() >= 1)
        @rule()
        def decode(self):
            self.session.decode()
            count(1 + (self.session.attention is not None))  # decode, attend

        @precondition(lambda self: not narrow and self.room() >= 2)
        @rule(data=st.data())
        def extend(self, data):
            self.session.extend(data.draw(st.integers(2, min(self.room(), 20))))
            count(1)

        @precondition(lambda self: self.session.spec.batch > 1)
        @rule(data=st.data())
        def fork(self, data):
            self.session.fork(*_fork_pair(data, self.session.spec.batch))
            count(1)

        @precondition(lambda self: not narrow)
        @rule()
        def compact(self):
            self.session.compact()
            count(1)

        @precondition(lambda self: not narrow)
        @rule(data=st.data())
        def window(self, data):
            self.session.window(data.draw(st.integers(1, self.session.spec.capacity)))
            count(1)

        @precondition(lambda self: not narrow)
        @rule()
        def read(self):
            self.session.read()
            count(1)

        @invariant()
        def checked_after_every_step(self):
            assert self.session.checks == len(self.session.steps)

    PagedCacheSession.TestCase.settings = settings(
        max_examples=max(1, target // (5 * 34)),
        stateful_step_count=12 if narrow else PER_SESSION,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        # The narrow machines fail on purpose (the shrink tests): derandomized, they shrink to
        # the same session on every run; they share the broad ones' database key: theirs keep
        # nothing.
        derandomize=narrow,
        database=None if narrow else database(),
    )
    return PagedCacheSession


def _run_until(host_kind: str, target: int, paged: bool = False) -> None:
    """Run rounds of drawn sessions until ``target`` steps have run on ``host_kind``."""
    machine = (_paged_machine if paged else _machine)(host_kind, target)
    key = f"paged-{host_kind}" if paged else host_kind
    while tally.STEPS[key] < target:
        machine.TestCase("runTest").runTest()


def test_interpreter_sessions_match_the_oracle():
    _run_until("interp", STEPS - PAGED_STEPS)


def test_gpu_sessions_match_the_oracle(gpu):
    _run_until("gpu", (STEPS - PAGED_STEPS) // 10)


def test_interpreter_paged_sessions_match_the_oracle():
    _run_until("interp", PAGED_STEPS, paged=True)


def test_gpu_paged_sessions_match_the_oracle(gpu):
    _run_until("gpu", PAGED_STEPS // 10, paged=True)


def test_the_fuzz_finds_a_row_appended_late_and_shrinks_it(monkeypatch):
    """A float append landing one row late (seqlens_k one too many) is found, and shrunk to a
    session of one step."""
    from kvdsl.session.formats import FloatFormat

    real = FloatFormat.append

    def late(self, w, cache, new):
        w.host.write(w.inputs["seqlens_k"].buffer, 0, np.asarray(w.lens + 1, np.int32))
        real(self, dataclasses.replace(w, lens=w.lens + 1), cache, new)

    monkeypatch.setattr(FloatFormat, "append", late)
    machine = _machine("interp", 5000, counted=False, narrow=True)  # 29 sessions at most
    with pytest.raises(SessionMismatch, match=r"^after step 0, (decode|prefill)"):
        machine.TestCase("runTest").runTest()


def test_the_paged_fuzz_finds_a_fork_without_its_copy_and_shrinks_it(monkeypatch):
    """A host that forgets the copy-on-write (it takes a page for the writer but never copies
    the shared one into it) is found, and shrunk to the shortest session that shows it: a
    prompt, a fork, and one append into the shared last page."""
    from kvdsl.session import paged

    def no_copy(self, pairs):  # the oracle copies; the pools do not
        for layer in self.layers:
            for model in (layer.model_k, layer.model_v):
                model[layer.live][pairs[:, 1]] = model[layer.live][pairs[:, 0]]

    monkeypatch.setattr(paged.PagedSession, "_copy", no_copy)
    machine = _paged_machine("interp", 5000, counted=False, narrow=True)
    with pytest.raises(SessionMismatch, match=r"^after step 2, decode") as err:
        machine.TestCase("runTest").runTest()
    assert "live pool" in str(err.value)
