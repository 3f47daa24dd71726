"""``window_shift``: a sliding-window cache that keeps the most recent tokens, as numpy.

A cache of capacity ``L`` rows per head holds, before this step, the last
``residentBefore = min(absTotal - keySeq, L)`` tokens at rows ``[0, residentBefore)``, where
``absTotal = max(keySeq, seqlens_k[b] + 1)`` counts every token seen after this step. The step
appends ``keySeq`` new tokens and keeps the last ``min(residentBefore + keySeq, L)`` of the
sequence *resident past, then new* contiguous at rows ``[0, kept)``; rows ``[kept, L)`` are
zero. New token ``j`` sits at absolute position ``absTotal - keySeq + j``, where K is rotated
(retained rows were rotated when they were appended).

Regions split the step into two disjoint passes: ``shift`` (retained past rows and the zeroed
tail) and ``append`` (the new rows); ``all`` is both.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kvdsl.reference.elementwise import rotate_neox, split_heads
from kvdsl.reference.modes import Rotary, Written

REGIONS = ("all", "shift", "append")


@dataclass(frozen=True)
class WindowPlan:
    """Per-batch window arithmetic (``[B]`` int64 arrays), all in rows of the cache."""

    abs_total: np.ndarray  # tokens seen after this step
    resident_before: np.ndarray  # valid past rows [0, resident_before)
    evicted: np.ndarray  # tokens of (resident past, new) that fall out of the window
    append_start: np.ndarray  # first row holding a new token
    kept: np.ndarray  # rows [0, kept) are valid after the step

    @property
    def new_dropped(self) -> np.ndarray:
        """Leading new tokens evicted at once (only when ``keySeq`` exceeds the capacity)."""
        return np.maximum(self.evicted - self.resident_before, 0)


def window_plan(seqlens_k: np.ndarray, key_seq: int, capacity: int) -> WindowPlan:
    """The window arithmetic of one step, in signed integers (nothing wraps)."""
    abs_total = np.maximum(key_seq, np.asarray(seqlens_k, dtype=np.int64) + 1)
    resident = np.minimum(abs_total - key_seq, capacity)
    filled = resident + key_seq
    kept = np.minimum(filled, capacity)
    evicted = filled - kept
    return WindowPlan(abs_total, resident, evicted, np.maximum(resident - evicted, 0), kept)


def window_shift(
    past_k: np.ndarray,
    past_v: np.ndarray,
    new_k: np.ndarray,
    new_v: np.ndarray,
    seqlens_k: np.ndarray,
    region: str = "all",
    rotary: Rotary | None = None,
) -> Written:
    """One step of the windowed cache; ``past`` is BNSH ``[B, H, L, D]``, ``new`` BSH.

    Returns the present cache (``past``'s shape and element type) and the rows ``region``
    writes. K of the new tokens is rotated at their absolute positions when ``rotary`` is given.
    """
    if region not in REGIONS:
        raise ValueError(f"region={region!r}: expected one of {REGIONS}")
    b, h, cap, d = past_k.shape
    k, v = split_heads(new_k, h), split_heads(new_v, h)
    key_seq = k.shape[2]
    plan = window_plan(seqlens_k, key_seq, cap)
    if rotary is not None:
        pos = (plan.abs_total[:, None] - key_seq + np.arange(key_seq))[:, None, :]
        k = rotate_neox(k, pos, rotary.cos, rotary.sin, rotary.half)
    out_k, out_v = np.zeros_like(past_k), np.zeros_like(past_v)
    for i in range(b):
        rb, kept = plan.resident_before[i], plan.kept[i]
        seq_k = np.concatenate([past_k[i, :, :rb], k[i].astype(past_k.dtype)], axis=1)
        seq_v = np.concatenate([past_v[i, :, :rb], v[i].astype(past_v.dtype)], axis=1)
        out_k[i, :, :kept] = seq_k[:, seq_k.shape[1] - kept :]
        out_v[i, :, :kept] = seq_v[:, seq_v.shape[1] - kept :]
    t = np.arange(cap)[None, :]
    appended = (t >= plan.append_start[:, None]) & (t < plan.kept[:, None])
    rows = {"all": np.ones_like(appended), "shift": ~appended, "append": appended}[region]
    mask = np.broadcast_to(rows[:, None, :, None], past_k.shape).copy()
    return Written(out_k, out_v, mask)
