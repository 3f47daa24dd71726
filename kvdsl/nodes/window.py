"""Where a step's new tokens land in a cache, from ``seqlens_k`` (one i32 per batch).

``seqlens_k[b]`` is the index of batch ``b``'s last token after this step, so the batch holds
``seqlens_k[b] + 1`` tokens in all, the last ``keySeq`` of them new.

**Negative ``seqlens_k``.** ``-1`` means an empty sequence (0 tokens). Values below ``-1`` mean
nothing; the template's ``u32(seqlens_k[b]) + 1u`` turns ``-2`` into ``2^32 - 1`` tokens, i.e. an
append at the very end of the cache and a rotary position far past the cos/sin tables. Here
:func:`total_tokens` clamps at ``-1`` first (``u32(max(seqlens_k[b], -1i)) + 1u``), so every
negative value reads as an empty sequence, which the callers then widen to ``keySeq`` tokens
(a right-padded first prompt). The clamp is in i32 before the conversion, so ``i32`` max still
gives ``2^31`` tokens without overflowing.

Two windows:

- :func:`append_window` (buffer-sharing caches, ``merge_share``): past and present have the full
  capacity ``seq`` per head; batch ``b``'s new tokens go to rows ``[appendStart, activeEnd)``
  with ``activeEnd = min(seq, max(keySeq, total))``. Clamping below by ``keySeq`` maps a
  right-padded first prompt (``total < keySeq``) to offset 0.
- :func:`sliding_window` (``window_shift``): the cache keeps the most recent ``min(total, seq)``
  tokens at rows ``[0, resident)``, the surviving past rows slid down by the eviction count.

When ``keySeq > seq`` (more new tokens than the cache holds) only the newest ``seq`` new tokens
fit: the first ``skip = keySeq - min(keySeq, seq)`` new tokens are dropped. Every subtraction
below has its invariant written beside it, so none can wrap in u32.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvdsl.ir import Buffer, KernelBuilder, Val, max_, min_, u32


def total_tokens(kb: KernelBuilder, seqlens_k: Buffer, b: Val, name: str = "total") -> Val:
    """``u32(max(seqlens_k[b], -1i)) + 1u``: batch ``b``'s token count (negative reads as 0)."""
    return kb.let(name, max_(seqlens_k[b], -1).to(u32) + 1)


@dataclass(frozen=True)
class AppendWindow:
    """Rows ``[append_start, active_end)`` take new tokens ``skip .. keySeq-1`` in order."""

    active_end: Val
    append_start: Val
    skip: Val


def append_window(
    kb: KernelBuilder, seqlens_k: Buffer, b: Val, seq: Val, key_seq: Val
) -> AppendWindow:
    """The append window of batch ``b`` in a buffer-sharing cache of ``seq`` rows per head."""
    total = total_tokens(kb, seqlens_k, b)
    kb.comment("Clamping below by keySeq maps a right-padded first prompt")
    kb.comment("(seqlens_k[b]+1 < keySeq) to append offset 0.")
    active_end = kb.let("activeEnd", min_(seq, max_(key_seq, total)))
    # fresh <= activeEnd and fresh <= keySeq, so neither subtraction wraps.
    fresh = kb.let("fresh", min_(key_seq, active_end))
    append_start = kb.let("appendStart", active_end - fresh)
    skip = kb.let("skip", key_seq - fresh)
    return AppendWindow(active_end, append_start, skip)


@dataclass(frozen=True)
class SlidingWindow:
    """A sliding-window step of one batch.

    After the step, rows ``[0, append_start)`` hold past rows ``evicted ..`` of the previous
    cache, rows ``[append_start, resident)`` hold new tokens ``skip .. keySeq-1``, and rows from
    ``resident`` on are empty. New token ``j`` sits at absolute position ``past + j``.
    """

    past: Val
    evicted: Val
    append_start: Val
    resident: Val
    skip: Val


def sliding_window(
    kb: KernelBuilder, seqlens_k: Buffer, b: Val, seq: Val, key_seq: Val
) -> SlidingWindow:
    """The eviction arithmetic of batch ``b`` for a window cache of capacity ``seq``."""
    total = total_tokens(kb, seqlens_k, b)
    abs_total = kb.let("absTotal", max_(key_seq, total))
    # absTotal >= keySeq.
    past = kb.let("past", abs_total - key_seq)
    resident_before = kb.let("residentBefore", min_(past, seq))
    resident = kb.let("resident", min_(abs_total, seq))
    fresh = kb.let("fresh", min_(key_seq, seq))
    # resident >= fresh because absTotal >= keySeq; the past rows that survive come first.
    append_start = kb.let("appendStart", resident - fresh)
    # residentBefore >= appendStart: with no eviction both equal past, else appendStart is
    # seq - fresh and residentBefore = min(past, seq) > seq - keySeq.
    evicted = kb.let("evicted", resident_before - append_start)
    skip = kb.let("skip", key_seq - fresh)
    return SlidingWindow(past, evicted, append_start, resident, skip)
