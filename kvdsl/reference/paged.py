"""The paged model in numpy: pools of pages, the two ways a token finds its page, and what each
paged mode does to them (:mod:`kvdsl.nodes.paged` states the layout).

A pool is held here as ``[pages, page_size, kv_heads, head_dim]`` (token-major: a page's slot,
then its head); :func:`pool_arrays` lays K and V out as a kernel binds them (NHD or HND inside a
page, two pools or one of ``[pages, 2, page]``) and :func:`pool_pages` reads them back. A *slot*
is ``page * page_size + offset``; a negative slot or page id means "no place" and is skipped.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kvdsl.reference.elementwise import F32, rms_norm, rotate_neox
from kvdsl.reference.rotation import rotation as rotation_of
from kvdsl.reference.modes import KNorm, Rotary


def pool_arrays(k: np.ndarray, v: np.ndarray, layout: str, pool: str) -> tuple[np.ndarray, ...]:
    """K and V pools ``[pages, P, H, D]`` as flat binding arrays: ``(key, value)`` for separate
    pools, ``(kv,)`` for a combined one; ``layout`` ``"nhd"`` or ``"hnd"`` inside a page."""
    if layout == "hnd":
        k, v = k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3)
    if pool == "combined":
        return (np.ascontiguousarray(np.stack([k, v], axis=1)).reshape(-1),)
    return np.ascontiguousarray(k).reshape(-1), np.ascontiguousarray(v).reshape(-1)


def pool_pages(
    arrays: tuple[np.ndarray, ...], heads: int, page_size: int, head_dim: int, layout: str,
    pool: str,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The inverse of :func:`pool_arrays`: K and V as ``[pages, P, H, D]``."""
    page = page_size * heads * head_dim
    if pool == "combined":
        pair = arrays[0].reshape(-1, 2, page)
        k, v = pair[:, 0], pair[:, 1]
    else:
        k, v = (a.reshape(-1, page) for a in arrays)
    inner = (heads, page_size) if layout == "hnd" else (page_size, heads)
    k, v = (x.reshape(len(x), *inner, head_dim) for x in (k, v))
    if layout == "hnd":
        k, v = k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3)
    return np.ascontiguousarray(k), np.ascontiguousarray(v)


def table_places(
    page_table: np.ndarray, seqlens_k: np.ndarray, key_seq: int, page_size: int
) -> tuple[np.ndarray, np.ndarray]:
    """The slots and positions ``[B, keySeq]`` of a step's new tokens through a page table
    ``[B, maxPages]``: sequence ``b`` holds ``total = seqlens_k[b] + 1`` tokens after the step
    (negative: none), the last ``fresh = min(keySeq, total)`` of them new, so new token ``t <
    fresh`` sits at position ``total - fresh + t``; later tokens (right padding) and tokens of a
    negative page id get slot ``-1``."""
    batch = len(seqlens_k)
    total = np.maximum(seqlens_k.astype(np.int64), -1) + 1
    fresh = np.minimum(key_seq, total)
    t = np.arange(key_seq)[None, :]
    pos = (total - fresh)[:, None] + t
    live = t < fresh[:, None]
    page_index = np.where(live, pos // page_size, 0)
    entry = page_table.reshape(batch, -1)[np.arange(batch)[:, None], page_index]
    slots = np.where(live & (entry >= 0), entry * page_size + pos % page_size, -1)
    return slots, np.where(live, pos, 0)


def prepare_k(
    k: np.ndarray,
    positions: np.ndarray,
    norm: KNorm | None,
    rot: Rotary | None,
    rotation: int = 0,
) -> np.ndarray:
    """K ``[..., D]`` in float32: RMS-normed, then NeoX-rotated at ``positions`` (``[...]``,
    broadcast over the last axis but one), then Walsh-Hadamard rotated over blocks of
    ``rotation`` (:mod:`kvdsl.reference.rotation`; 0: not)."""
    k = np.asarray(k, F32)
    if norm is not None:
        k = rms_norm(k, norm.weight, norm.eps)
    if rot is not None:
        k = rotate_neox(k, positions, rot.cos, rot.sin, rot.half)
    if rotation:
        k = rotation_of(k.shape[-1], rotation).rotate(k)
    return k


@dataclass
class Paged:
    """A pass's effect on K/V pools ``[pages, P, H, D]``: values where ``mask`` is True."""

    key: np.ndarray
    value: np.ndarray
    mask: np.ndarray


def append(
    pages: int, page_size: int, new_k: np.ndarray, new_v: np.ndarray, slots: np.ndarray
) -> Paged:
    """``paged_append``: new rows ``[T, H, D]`` (K already prepared) to their ``slots`` ``[T]``
    of pools of ``pages`` pages; a negative slot is skipped. Two tokens in one slot have no
    meaning (their order would decide): a ValueError."""
    t, h, d = new_k.shape
    key = np.zeros((pages * page_size, h, d), new_k.dtype)
    value = np.zeros((pages * page_size, h, d), new_v.dtype)
    mask = np.zeros((pages * page_size, h, d), bool)
    slots = np.asarray(slots).reshape(-1)
    live = slots >= 0
    if len(np.unique(slots[live])) != live.sum():
        raise ValueError("two tokens are mapped to one slot")
    key[slots[live]], value[slots[live]], mask[slots[live]] = new_k[live], new_v[live], True
    shape = (pages, page_size, h, d)
    return Paged(key.reshape(shape), value.reshape(shape), mask.reshape(shape))


def gather(
    k: np.ndarray, v: np.ndarray, slots: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``paged_read``: the rows ``[..., H, D]`` of ``slots`` (any shape) from pools ``[pages, P,
    H, D]``, and the mask of the slots read (a negative slot reads nothing)."""
    rows_k, rows_v = k.reshape(-1, *k.shape[2:]), v.reshape(-1, *v.shape[2:])
    live = slots >= 0
    at = np.where(live, slots, 0)
    return rows_k[at], rows_v[at], live


def copy_pages(k: np.ndarray, v: np.ndarray, pairs: np.ndarray) -> Paged:
    """``paged_copy``: page ``dst`` becomes a copy of page ``src`` for each ``(src, dst)`` of
    ``pairs`` ``[n, 2]``; a destination that is another pair's source (or two pairs' destination)
    has no meaning in one pass: a ValueError."""
    pairs = np.asarray(pairs).reshape(-1, 2)
    src, dst = pairs[:, 0], pairs[:, 1]
    if len(np.unique(dst)) != len(dst) or np.intersect1d(src, dst).size:
        raise ValueError("a page is copied to twice, or copied to and from in one pass")
    key, value, mask = k.copy(), v.copy(), np.zeros(k.shape, bool)
    key[dst], value[dst], mask[dst] = k[src], v[src], True
    return Paged(key, value, mask)


def compact(k: np.ndarray, v: np.ndarray, live: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``paged_compact``: the live pages ``live`` ``[n]`` gathered in order into pages ``0 ..
    n-1`` of new pools (the rest of them untouched)."""
    return k[live], v[live]


def window(
    page_table: np.ndarray, seqlens_k: np.ndarray, window_tokens: int, page_size: int
) -> tuple[np.ndarray, np.ndarray]:
    """``paged_window``: the page table ``[B, maxPages]`` after a sliding window of
    ``window_tokens`` tokens and the pages it released. Sequence ``b`` keeps its last
    ``window_tokens`` of ``total = seqlens_k[b] + 1`` tokens; a page whose tokens all lie
    before ``total - window_tokens`` is released: its entry becomes ``-1`` and its id goes to
    ``freed[b, i]`` (every other entry of ``freed`` is ``-1``). No K/V row moves."""
    batch = len(seqlens_k)
    table = page_table.reshape(batch, -1)
    total = np.maximum(seqlens_k.astype(np.int64), -1) + 1
    first = np.maximum(total - window_tokens, 0)
    ends = (np.arange(table.shape[1]) + 1) * page_size
    gone = ends[None, :] <= first[:, None]
    freed = np.where(gone, table, -1).astype(np.int32)
    return np.where(gone, -1, table).astype(np.int32), freed
