"""What a contiguous and a paged session share (:class:`Run`): canary-fenced buffers, the new
tokens' values, ranges and writes, the checks of a prompt's lengths and of a fork's sequences,
each step's record (:class:`Step`) and the oracle check after it, and the attention step after a
decode; :class:`SessionMismatch`, what a check raises, and :func:`whole`, the check of a
spec's whole-number fields."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator

import numpy as np

from kvdsl.reference.judge import values
from kvdsl.session.formats import Pair, SessionError
from kvdsl.session.host import Bound, Buffer, Host, InterpHost, Program, aligned

if TYPE_CHECKING:
    from kvdsl.session.paged_rows import PagedSpec
    from kvdsl.session.session import Spec


def whole(name: str, value: object, least: int, most: int | None = None) -> int:
    """``value`` as an int where it is a whole number from ``least`` to ``most`` (no bound:
    None), else a :class:`SessionError` naming ``name``."""
    ok = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
    if not ok or value < least or (most is not None and value > most):
        allowed = f"{least} to {most}" if most is not None else f"{least} or more"
        raise SessionError(f"{name}={value!r}: expected a whole number, {allowed}")
    return int(value)


@dataclass
class Step:
    """One operation as it ran: its name, new tokens per sequence, host seconds."""

    op: str
    tokens: int
    host: float
    gpu: float | None = None


@dataclass
class Run:
    """What a contiguous and a paged session share: their fields, canary-fenced buffers, the
    new tokens' values, ranges and writes, the checks of a prompt's lengths and of a fork's
    sequences, the steps' record and the oracle check after each. A subclass narrows ``spec``,
    calls :meth:`_begin`, sets ``canary``, ``layers`` (each holding its ``k`` and ``v`` pairs
    of :meth:`_cache_buffers`), ``_new``, ``_new_tokens``, ``input`` (the dtype of the new K
    and V) and ``attention`` (None, or the attention step's
    :class:`~kvdsl.session.attention.Attention`) and defines ``check`` and
    ``_attend_inputs``."""

    spec: Spec | PagedSpec
    host: Host = field(default_factory=InterpHost)
    seed: int = 0
    check_every: bool = True
    q_heads: int = 0
    #: check every this many attention steps' output (1: each one); the others are dispatched
    #: and timed alone, the oracle's rows neither decoded nor the output read back
    attention_every: int = 1

    def _begin(self, programs: list[Program]) -> None:
        """Compile ``programs`` on the host; start the token generator, every sequence empty
        and no step taken."""
        for program in programs:
            self.host.prepare(program)
        self.rng = np.random.default_rng(self.seed)
        self.lengths = np.zeros(self.spec.batch, np.int64)
        self.steps: list[Step] = []
        self.checks = 0

    def _cache_buffers(
        self, body: int, room: int, fill: Callable[[Buffer, np.random.Generator], None]
    ) -> list[tuple[tuple[Buffer, Buffer], tuple[Buffer, Buffer]]]:
        """Each layer's two K and two V buffers (the live one and the other) of ``body`` bytes
        fenced by :meth:`_fenced_buffer` (``room`` bytes more), ``fill(buf, fences)`` writing
        each one's body as it is made. Each buffer's canaries are bytes of its own, so that a
        row copied from one buffer's canary into another's is seen."""
        fences = np.random.default_rng(2**31 + self.seed)
        self._fences: dict[str, tuple[bytes, bytes]] = {}
        layers = []
        for i in range(self.spec.layers):
            sides = []
            for side in "kv":
                pair = []
                for which in range(2):
                    buf = self._fenced_buffer(fences, f"layer{i}_{side}{which}", body, room)
                    fill(buf, fences)
                    pair.append(buf)
                sides.append(tuple(pair))
            layers.append(tuple(sides))
        return layers

    def _fenced_buffer(
        self, fences: np.random.Generator, label: str, body: int, room: int = 0
    ) -> Buffer:
        """A buffer of ``body`` bytes at ``canary`` between canary bytes of its own (drawn from
        ``fences``, written, and kept for :meth:`_check_canaries`), the trailing ones ``room``
        bytes more; the caller writes the body."""
        buf = self.host.buffer(label, 2 * self.canary + aligned(body) + aligned(room))
        tail = buf.size - self.canary - body
        before, after = (
            fences.integers(0, 256, n, np.uint8).tobytes() for n in (self.canary, tail)
        )
        self._fences[label] = (before, after)
        self.host.write(buf, 0, before)
        self.host.write(buf, self.canary + body, after)
        return buf

    def _check_canaries(self, buf: Buffer, raw: bytes, end: int, where: str, what: str) -> None:
        """Raise :class:`SessionMismatch` naming the first canary byte of ``buf`` (read as
        ``raw``; its body is bytes ``[canary, end)``, a ``what``) that a dispatch wrote."""
        before, after = self._fences[buf.label]
        for at, got, want in ((0, raw[: self.canary], before), (end, raw[end:], after)):
            if got != want:
                first = next(j for j in range(len(got)) if got[j] != want[j])
                raise SessionMismatch(
                    f"{where}: byte {at + first} of buffer {buf.label}, a canary, was written "
                    f"(the {what} is bytes [{self.canary}, {end}))"
                )

    def _read_back(self, end: int, what: str) -> Iterator[tuple[str, Any, str, int, bytes]]:
        """Each buffer of every layer read back, its canaries checked (:meth:`_check_canaries`;
        its body, a ``what``, ends at ``end``): the place to name in a mismatch, the layer,
        its side (``key``, ``value``), which of its two buffers, and the body's bytes."""
        for i, layer in enumerate(self.layers):
            for side, bufs in (("key", layer.k), ("value", layer.v)):
                where = f"after {self._where()}: layer {i} {side}"
                for which, buf in enumerate(bufs):
                    raw = self.host.read(buf)
                    self._check_canaries(buf, raw, end, where, what)
                    yield where, layer, side, which, raw[self.canary : end]

    def _token_bytes(self, key_seq: int) -> int:
        s = self.spec
        return s.batch * key_seq * s.kv_heads * s.head_dim * self.input.itemsize

    def _new_ranges(self, key_seq: int) -> list[Pair]:
        """Each layer's range of the new K and V buffers for ``key_seq`` tokens per sequence
        (the buffers grow to the most tokens asked for)."""
        per = aligned(self._token_bytes(key_seq))
        if self._new is None or key_seq > self._new_tokens:
            size = self.spec.layers * per
            self._new = (self.host.buffer("new_k", size), self.host.buffer("new_v", size))
            self._new_tokens = key_seq
        size = self._token_bytes(key_seq)
        return [
            (Bound(self._new[0], i * per, size), Bound(self._new[1], i * per, size))
            for i in range(self.spec.layers)
        ]

    def _tokens(self, key_seq: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """Each layer's new K and V values, ``[batch, key_seq, kv_heads * head_dim]``."""
        s = self.spec
        shape = (s.batch, key_seq, s.kv_heads * s.head_dim)
        return [
            (values(self.rng, shape, self.input), values(self.rng, shape, self.input))
            for _ in range(s.layers)
        ]

    def _write_tokens(
        self, tokens: list[tuple[np.ndarray, np.ndarray]], key_seq: int
    ) -> list[Pair]:
        """Each layer's new K and V ``tokens`` written to its ranges of the new buffers
        (:meth:`_new_ranges`), which are returned."""
        new = self._new_ranges(key_seq)
        for (k, v), (rk, rv) in zip(tokens, new):
            self.host.write(rk.buffer, rk.offset, k)
            self.host.write(rv.buffer, rv.offset, v)
        return new

    def _prompts(self, lengths) -> list:
        """``lengths``, checked: one prompt length per sequence, each 0 to the capacity."""
        s = self.spec
        lengths = list(lengths)
        if len(lengths) != s.batch:
            raise SessionError(
                f"lengths={lengths}: expected one prompt length per sequence ({s.batch})"
            )
        for b, n in enumerate(lengths):
            whole(f"lengths[{b}]", n, 0, s.capacity)
        return lengths

    def _fork_pair(self, src: int, dst: int) -> tuple[int, int]:
        """``src`` and ``dst``, checked: two sequences."""
        s = self.spec
        src = whole("src", src, 0, s.batch - 1)
        dst = whole("dst", dst, 0, s.batch - 1)
        if src == dst:
            raise SessionError(f"fork: src={src} and dst={dst}: expected two sequences")
        return src, dst

    def _step(self, op: str, tokens: int, t: float) -> None:
        """The host's step ends, recorded as ``op`` of ``tokens`` new tokens begun at ``t``."""
        self.host.step()
        self.steps.append(Step(op, tokens, time.perf_counter() - t))

    def _after(self) -> None:
        if self.check_every:
            self.check()

    def _attend(self) -> None:
        """The attention step after a decode: ``attend`` over every layer's cache, its output
        compared with the reference's over the oracle's rows (:mod:`kvdsl.session.attention`)
        every :attr:`attention_every` steps; then the usual check. The step's host time is the
        dispatch's alone (writing the queries, encoding, submitting), as every other step's: the
        oracle's rows are decoded before it and the output read back and checked after."""
        due = (self.attention.runs + 1) % self.attention_every == 0
        lengths, rows, layers, shape, params, *inputs = self._attend_inputs(due)
        t = time.perf_counter()
        sent = self.attention.dispatch(lengths, layers, shape, params, *inputs)
        self.steps.append(Step("attend", 1, time.perf_counter() - t))
        if due:
            where = f"step {len(self.steps) - 1}, attend"
            problem = self.attention.check(where, sent, rows, layers)
            if problem:
                raise SessionMismatch(problem)
        self._after()

    def _attend_inputs(self, oracle: bool) -> tuple:
        """The attention step's inputs: each sequence's positions, the oracle's rows it attends
        over, each layer's cache and, where ``oracle``, the oracle's rows (else None; see
        :class:`~kvdsl.session.attention.AttendLayer`), the cache's shape, params and, where it
        has them, integer inputs (the page table)."""
        raise NotImplementedError

    def _where(self) -> str:
        last = self.steps[-1] if self.steps else None
        what = "the start" if last is None else f"{last.op} ({last.tokens} tokens)"
        return f"step {len(self.steps) - 1}, {what}" if last else what

    def gpu_times(self) -> None:
        """Fill each step's GPU seconds from the host's timestamps (where it has them)."""
        times = self.host.gpu_seconds()
        if times is None:
            return
        for st, seconds in zip(self.steps, times):
            st.gpu = seconds


class SessionMismatch(AssertionError):
    """The host's cache and the oracle's differ, or a canary was written."""
