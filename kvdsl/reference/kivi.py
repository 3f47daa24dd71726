"""KIVI's 2-bit (and 4-bit) cache, in numpy: what kvdsl's KIVI format means.

KIVI (Liu et al., 2024; github.com/jy-yuan/KIVI) quantises K and V asymmetrically (codes ``0 ..
2^bits - 1`` over ``min .. max``) along different axes, because K's large values sit in a few
channels and V's do not:

- **K per channel**, over groups of ``group`` tokens: each channel of each group of ``group``
  consecutive tokens has its own scale and minimum. The codes of one channel are packed along
  the tokens, ``32 / bits`` tokens per u32, the first token in the lowest bits: codes ``[..., D,
  T / (32 / bits)]``, scales and minimums ``[..., D, T / group]``.
- **V per token**, over groups of ``group`` channels: codes ``[..., T, D / (32 / bits)]``, the first
  channel in the lowest bits, scales and minimums ``[..., T, D / group]``.
- **The residual**: the newest tokens that do not fill a group of K are kept unquantised (f16)
  until the group fills; then a flush quantises the group. V's rows of those tokens wait with them,
  so a token is quantised in K and V at once. (KIVI's ``models/llama_kivi.py`` keeps V's newest
  ``residual_length`` tokens in f16 and quantises the oldest one a step; a V token's codes are
  its own row's, whenever it is quantised, so a quantised V row has the same bytes here; only
  which tokens a reader finds in f16 differs.)

A scale is ``(max - min) / (2^bits - 1)``; a code ``clamp(round((x - min) / scale), 0, 2^bits -
1)``, rounding half to even, with the quotient computed as ``(x - min) * (1 / scale)`` in float32
(a constant group, scale 0, gives code 0); scales and minimums are stored as f16, as KIVI keeps
them in the model's dtype, and the codes are computed from the stored (f16) values. A value
reads back as ``code * scale + min``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

F32, F16 = np.float32, np.float16


@dataclass(frozen=True)
class Kivi:
    """One sequence-head's cache: K's and V's codes, scales and minimums over the first
    ``quantised`` tokens, and the residual's K and V rows (f16) after them."""

    bits: int
    group: int
    k_codes: np.ndarray  # [D, quantised / (32 / bits)] u32
    k_scale: np.ndarray  # [D, quantised / group] f16
    k_min: np.ndarray
    v_codes: np.ndarray  # [quantised, D / (32 / bits)] u32
    v_scale: np.ndarray  # [quantised, D / group] f16
    v_min: np.ndarray
    k_residual: np.ndarray  # [T - quantised, D] f16
    v_residual: np.ndarray

    @property
    def quantised(self) -> int:
        return self.v_codes.shape[0]


def _check(bits: int, group: int, d: int) -> None:
    if bits not in (2, 4):
        raise ValueError(f"kivi: bits={bits!r}: expected 2 or 4")
    if not isinstance(group, int) or group < 32 // bits or group % (32 // bits):
        raise ValueError(f"kivi: group={group!r}: expected a multiple of {32 // bits}")
    if d % group:
        raise ValueError(f"kivi: head size {d}: expected a multiple of group={group}")


def _asymmetric(x: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Codes, f16 scales and f16 minimums of ``x [..., n]``, one scale per last axis."""
    qmax = (1 << bits) - 1
    lo = np.min(x, axis=-1).astype(F16)
    hi = np.max(x, axis=-1).astype(F16)
    scale = ((hi.astype(F32) - lo.astype(F32)) / F32(qmax)).astype(F16)
    s = scale.astype(F32)
    inv = np.divide(F32(1), s, out=np.zeros_like(s), where=s > 0)
    q = np.rint((x.astype(F32) - lo.astype(F32)[..., None]) * inv[..., None])
    return np.clip(q, 0, qmax).astype(np.uint32), scale, lo


def _pack(codes: np.ndarray, bits: int) -> np.ndarray:
    """Codes ``[..., n]`` packed ``32 / bits`` to a u32 along the last axis, first lowest."""
    per = 32 // bits
    c = codes.reshape(*codes.shape[:-1], codes.shape[-1] // per, per).astype(np.uint32)
    shifts = (np.arange(per, dtype=np.uint32) * np.uint32(bits))[None]
    return np.bitwise_or.reduce(c << shifts, axis=-1)


def _unpack(words: np.ndarray, bits: int) -> np.ndarray:
    per = 32 // bits
    shifts = np.arange(per, dtype=np.uint32) * np.uint32(bits)
    c = (words[..., None] >> shifts) & np.uint32((1 << bits) - 1)
    return c.reshape(*words.shape[:-1], words.shape[-1] * per)


def quantize(k: np.ndarray, v: np.ndarray, bits: int = 2, group: int = 32) -> Kivi:
    """The KIVI cache of one sequence-head's rows ``k``, ``v`` ``[T, D]``."""
    k, v = np.asarray(k, dtype=F32), np.asarray(v, dtype=F32)
    t, d = k.shape
    _check(bits, group, d)
    n = t - t % group
    kg = k[:n].reshape(n // group, group, d).transpose(2, 0, 1)  # [D, groups, group]
    kc, ks, km = _asymmetric(kg, bits)
    vc, vs, vm = _asymmetric(v[:n].reshape(n, d // group, group), bits)
    return Kivi(
        bits,
        group,
        _pack(kc.reshape(d, n), bits),
        ks,
        km,
        _pack(vc.reshape(n, d), bits),
        vs,
        vm,
        k[n:].astype(F16),
        v[n:].astype(F16),
    )


def dequantize(cache: Kivi) -> tuple[np.ndarray, np.ndarray]:
    """The f32 rows ``k``, ``v`` ``[T, D]`` the cache reads back as."""
    bits, g, n = cache.bits, cache.group, cache.quantised
    d = cache.k_codes.shape[0]
    kc = _unpack(cache.k_codes, bits).astype(F32).reshape(d, n // g, g)
    k = kc * cache.k_scale.astype(F32)[..., None] + cache.k_min.astype(F32)[..., None]
    vc = _unpack(cache.v_codes, bits).astype(F32).reshape(n, d // g, g)
    v = vc * cache.v_scale.astype(F32)[..., None] + cache.v_min.astype(F32)[..., None]
    k = np.concatenate([k.reshape(d, n).T, cache.k_residual.astype(F32)])
    v = np.concatenate([v.reshape(n, d), cache.v_residual.astype(F32)])
    return k, v


def row_bytes(d: int, bits: int = 2, group: int = 32) -> int:
    """The bytes one token's quantised K row, or V row, takes with its share of the scales and
    minimums (the residual excluded): ``d * bits / 8`` of codes and ``4 d / group`` of f16 stats
    (K's per channel over ``group`` tokens, V's per ``group`` channels of the token: the same)."""
    _check(bits, group, d)
    return d * bits // 8 + 4 * d // group


# The paged layout. A page holds ``page_size`` tokens (a multiple of ``group``: whole groups) of
# every KV head of a sequence, in one u32 pool ``[pages, kv_heads, page_words]``; a sequence's
# token ``t`` lies in page ``table[t // page_size]`` (a negative entry: no page). Head ``h``'s
# part of a page holds, for the page's tokens ``t0 .. t0 + page_size``, K's codes ``[D,
# page_size / (32 / bits)]``, K's stats ``[D, page_size / group]``, V's codes ``[page_size, D /
# (32 / bits)]`` and V's stats ``[page_size, D / group]``, in that order; a stat is one u32, the
# f16 scale in the low half and the f16 minimum in the high half. A contiguous cache of ``seq``
# tokens a sequence is the same with one page of ``seq`` tokens per sequence (the table of
# sequence ``b``: ``[b]``).


def page_words(d: int, bits: int, group: int, page_size: int) -> int:
    """The u32 words of one KV head's part of a page."""
    _check(bits, group, d)
    if page_size % group:
        raise ValueError(f"kivi: page_size={page_size!r}: expected a multiple of group={group}")
    per = 32 // bits
    return 2 * (d * page_size // per) + 2 * (d * page_size // group)


def stat_words(scale: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """The u32 stats of f16 scales and minimums: the scale's bits low, the minimum's high."""
    s = np.asarray(scale, F16).view(np.uint16).astype(np.uint32)
    return s | (np.asarray(lo, F16).view(np.uint16).astype(np.uint32) << 16)


def _parts(d: int, bits: int, group: int, page_size: int) -> list[tuple[int, int]]:
    """(start, length) of K's codes, K's stats, V's codes, V's stats in a head's part."""
    codes, stats = d * page_size // (32 // bits), d * page_size // group
    return [(0, codes), (codes, stats), (codes + stats, codes), (2 * codes + stats, stats)]


def write_pages(
    pool: np.ndarray, table: np.ndarray, heads: list[Kivi], page_size: int, start: int = 0
) -> None:
    """Lay one sequence's quantised groups (``heads``: its KV heads' caches, each of the same
    tokens, the first at token ``start``, a multiple of the group) into ``pool [pages,
    kv_heads, page_words]`` through its table row; a group whose entry is negative, and every
    word the groups do not reach, is left as it is."""
    first = heads[0]
    bits, g = first.bits, first.group
    d = first.k_codes.shape[0]
    per = 32 // bits
    parts = _parts(d, bits, g, page_size)
    for n in range(first.quantised // g):
        t = start + n * g
        page, at = int(table[t // page_size]), t % page_size
        if page < 0:
            continue
        for h, c in enumerate(heads):
            part = pool[page, h]
            kc, ks, vc, vs = (part[s : s + length] for s, length in parts)
            kc = kc.reshape(d, page_size // per)
            kc[:, at // per : (at + g) // per] = c.k_codes[:, n * g // per : (n + 1) * g // per]
            ks.reshape(d, page_size // g)[:, at // g] = stat_words(c.k_scale, c.k_min)[:, n]
            vc.reshape(page_size, d // per)[at : at + g] = c.v_codes[n * g : (n + 1) * g]
            vs = vs.reshape(page_size, d // g)
            vs[at : at + g] = stat_words(c.v_scale, c.v_min)[n * g : (n + 1) * g]


def read_pages(
    pool: np.ndarray,
    table: np.ndarray,
    head: int,
    quantised: int,
    bits: int,
    group: int,
    page_size: int,
    residual_k: np.ndarray,
    residual_v: np.ndarray,
) -> Kivi:
    """KV head ``head``'s cache of one sequence from ``pool [pages, kv_heads, page_words]``
    through its table row: its first ``quantised`` tokens' groups, then the residual's f16
    rows ``[T - quantised, D]``."""
    d = residual_k.shape[-1]
    per = 32 // bits
    parts = _parts(d, bits, group, page_size)
    kc, ks, vc, vs = [], [], [], []
    for j in range(-(-quantised // page_size)):
        page = int(table[j])
        if page < 0:
            raise ValueError(f"kivi: page table entry {j} is {page}: its tokens have no page")
        n = min(quantised - j * page_size, page_size)
        part = pool[page, head]
        views = [part[s : s + length] for s, length in parts]
        kc.append(views[0].reshape(d, page_size // per)[:, : n // per])
        ks.append(views[1].reshape(d, page_size // group)[:, : n // group])
        vc.append(views[2].reshape(page_size, d // per)[:n])
        vs.append(views[3].reshape(page_size, d // group)[:n])

    def join(xs: list[np.ndarray], axis: int, shape: tuple[int, int]) -> np.ndarray:
        return np.concatenate(xs, axis) if xs else np.zeros(shape, np.uint32)

    k_codes = join(kc, 1, (d, 0))
    k_stats = join(ks, 1, (d, 0))
    v_stats = join(vs, 0, (0, d // group))

    def halves(words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        w = words.astype(np.uint32)
        return (w & 0xFFFF).astype(np.uint16).view(F16), (w >> 16).astype(np.uint16).view(F16)

    k_scale, k_min = halves(k_stats)
    v_scale, v_min = halves(v_stats)
    return Kivi(
        bits,
        group,
        k_codes,
        k_scale,
        k_min,
        join(vc, 0, (0, d // per)),
        v_scale,
        v_min,
        np.asarray(residual_k, F16),
        np.asarray(residual_v, F16),
    )
