"""Dense quantised formats of a cache row, with their scales computed from the row itself.

Every function takes rows ``x`` of shape ``[..., D]`` (any leading axes: batch, head, token) and
computes in float32. The scale of a row (or a ggml block) is derived from its own values, so the
kernels compute it with a max-abs (or min/max) reduction; ``inv = 1 / scale`` (``0`` for an all-zero
row, whose codes are then all the zero code) multiplies each element, as ggml does.

Dense formats (one scale per row, that is per (token, head)), packed into u32 words:

- ``int8``: ``scale = amax / 127``, ``q = clamp(round_even(x * inv), -127, 127)``; element
  ``4j + l`` is byte ``l`` (bits ``8l .. 8l+7``) of word ``j`` as a two's-complement byte, the
  order of WGSL's ``pack4xI8``. ``-128`` is never written (the format is symmetric).
  Dequantised: ``q * scale``. ``D / 4`` words and one f32 scale: ``D + 4`` bytes.
- ``int4``: ``scale = amax / 7``, ``q = clamp(round_even(x * inv), -7, 7)`` stored as the nibble
  ``q + 8`` (``1 .. 15``; nibble 0, the code of ``-8``, is never written, so the format is
  symmetric); element ``8j + l`` is nibble ``l`` (bits ``4l .. 4l+3``) of word ``j``.
  Dequantised: ``(nibble - 8) * scale``. ``D / 8`` words and one f32 scale: ``D / 2 + 4`` bytes.
- ``int4_asym``: over the row's ``lo = min(x)`` .. ``hi = max(x)``, ``scale = (hi - lo) / 15``
  and zero point ``lo``; ``q = clamp(round_even((x - lo) * inv), 0, 15)`` stored as the nibble
  ``q``, in ``int4``'s order. Dequantised: ``q * scale + lo``. ``D / 8`` words and two f32
  words (scale, zero point): ``D / 2 + 8`` bytes.

Each is a point of a family over its bits per code (:class:`Spec`, :func:`quantize_dense`):
``twos`` (int8: ``qmax = 2^(bits-1) - 1``, two's-complement fields), ``offset`` (int4: fields
``q + 2^(bits-1)``) and ``asymmetric`` (int4_asym: codes ``0 .. 2^bits - 1``), so a kernel's
format value of another width (a 2-bit asymmetric one) is referenced by its family and bits.

ggml's block formats, byte for byte as ``quantize_row_q8_0_ref`` / ``quantize_row_q4_0_ref``
(``ggml/src/ggml-quants.c``) write them; blocks of 32 elements, each block its f16 scale ``d``
(little-endian, float32 → float16 rounding to nearest even) followed by its codes:

- ``q8_0`` (34 bytes a block): ``d = amax / 127``, ``qs[j] = roundf(x[j] * id)`` as int8, where
  ``roundf`` rounds half away from zero (``2.5 → 3``, ``-2.5 → -3``) and ``id = 1 / d`` in
  float32 (the codes use the f32 ``d``, not its f16 rounding). Dequantised: ``qs * f16(d)``.
- ``q4_0`` (18 bytes a block): ``max`` is the *signed* value of largest magnitude (the first one
  on a tie of magnitudes), ``d = max / -8``, so that ``max`` itself maps to ``-8`` (nibble 0) and
  the other sign reaches ``+8``, clamped to 7; the nibble is ``min(15, trunc(x * id + 8.5))``
  (halves round up: ``-0.5 → 8``, ``0.5 → 9``). Byte ``j`` holds element ``j`` in its low
  nibble and element ``j + 16`` in its high nibble. Dequantised: ``(nibble - 8) * f16(d)``.
  An all-zero block has ``d = 0 / -8 = -0.0``: its scale bytes are ``00 80``, its codes ``0x88``.

ONNX Runtime WebGPU's ``ort_q4`` (family ``ort_tq``, :mod:`kvdsl.reference.ort_tq`): a row's
L2 norm (summed in ORT's workgroup order) as its one scale, and 4-bit indices ``0 .. 15`` of ORT's
centroids (``int4``'s order), the number of ORT's boundaries at most ``x / norm``. Dequantised:
``centroid[q] * norm``. Its rows are stored rotated: :func:`own_rotation` is ORT's whole-head
unsigned Walsh-Hadamard transform, which the writers apply to K and V before quantising (the
functions here take and give rows in the rotated basis). ``D / 8`` words and one f32 norm.

A row of ggml blocks is the blocks back to back; in u32 words (:func:`words`) a row whose byte
count is not a multiple of 4 (an odd number of q8_0 or q4_0 blocks) ends with zero padding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from kvdsl.reference import ort_tq
from kvdsl.reference.rotation import rotation as rotation_of

from kvdsl.reference.elementwise import rms_norm, rotate_neox, split_heads
from kvdsl.reference.modes import KNorm, Rotary, share_window

F32 = np.float32
QK = 32  # elements per ggml block
Q8_0_BLOCK_BYTES = 2 + QK
Q4_0_BLOCK_BYTES = 2 + QK // 2


@dataclass(frozen=True)
class Dense:
    """A dense quantised row set: ``words`` ``[..., W]`` u32, ``scale`` ``[...]`` f32 and, for
    ``int4_asym``, ``zero`` ``[...]`` f32 (the row's minimum)."""

    words: np.ndarray
    scale: np.ndarray
    zero: np.ndarray | None = None


def _rows(x: np.ndarray, multiple: int, fmt: str) -> np.ndarray:
    x = np.asarray(x, dtype=F32)
    if x.ndim < 1 or x.shape[-1] % multiple:
        raise ValueError(f"{fmt} needs rows of a multiple of {multiple} elements, got {x.shape}")
    return x


def _inverse(scale: np.ndarray) -> np.ndarray:
    """``1 / scale`` in float32, ``0`` where the scale is ``0``."""
    with np.errstate(divide="ignore"):
        return np.where(scale == 0, F32(0), F32(1) / scale).astype(F32)


def _pack(fields: np.ndarray, bits: int) -> np.ndarray:
    """Unsigned ``bits``-wide fields ``[..., D]`` into u32 words, field ``l`` of each group of
    ``32 / bits`` at bits ``l * bits``."""
    per = 32 // bits
    f = fields.astype(np.uint32).reshape(*fields.shape[:-1], -1, per)
    shifts = (np.arange(per, dtype=np.uint32) * np.uint32(bits)).astype(np.uint32)
    return np.bitwise_or.reduce(f << shifts, axis=-1).astype(np.uint32)


def _unpack(words_: np.ndarray, bits: int) -> np.ndarray:
    """The unsigned fields of :func:`_pack`, ``[..., W * 32 / bits]`` u32."""
    per = 32 // bits
    w = np.asarray(words_, dtype=np.uint32)[..., None]
    shifts = (np.arange(per, dtype=np.uint32) * np.uint32(bits)).astype(np.uint32)
    f = (w >> shifts) & np.uint32((1 << bits) - 1)
    return f.reshape(*w.shape[:-2], -1)


def _symmetric(x: np.ndarray, qmax: int) -> tuple[np.ndarray, np.ndarray]:
    scale = (np.max(np.abs(x), axis=-1) / F32(qmax)).astype(F32)
    q = np.rint(x * _inverse(scale)[..., None])
    return np.clip(q, -qmax, qmax).astype(np.int32), scale


def quantize_int8(x: np.ndarray) -> Dense:
    """Dense symmetric int8 of rows ``x`` (``D % 4 == 0``): four codes per word."""
    return quantize_dense(x, "int8")


def dequantize_int8(words_: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """The f32 rows of :func:`quantize_int8`'s words and scales."""
    return dequantize_dense("int8", words_, scale)


def quantize_int4(x: np.ndarray) -> Dense:
    """Dense symmetric int4 of rows ``x`` (``D % 8 == 0``): eight nibbles ``q + 8`` per word."""
    return quantize_dense(x, "int4")


def dequantize_int4(words_: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """The f32 rows of :func:`quantize_int4`'s words and scales."""
    return dequantize_dense("int4", words_, scale)


def quantize_int4_asym(x: np.ndarray) -> Dense:
    """Asymmetric int4 of rows ``x`` (``D % 8 == 0``): nibbles ``q`` over ``min .. max``."""
    return quantize_dense(x, "int4_asym")


def dequantize_int4_asym(words_: np.ndarray, scale: np.ndarray, zero: np.ndarray) -> np.ndarray:
    """The f32 rows of :func:`quantize_int4_asym`'s words, scales and zero points."""
    return dequantize_dense("int4_asym", words_, scale, zero)


def _blocks(x: np.ndarray, fmt: str) -> np.ndarray:
    x = _rows(x, QK, fmt)
    return x.reshape(*x.shape[:-1], -1, QK)


def _half_bytes(d: np.ndarray) -> np.ndarray:
    """``d`` (f32) as float16's two little-endian bytes, ``[..., 2]``."""
    return d.astype("<f2")[..., None].view(np.uint8)


def _packed(d: np.ndarray, qs: np.ndarray) -> np.ndarray:
    """ggml blocks ``[..., n, 2 + m]``: each block's f16 scale ``d`` before its code bytes
    ``qs`` ``[..., n, m]``, the blocks of a row joined."""
    out = np.concatenate([_half_bytes(d), qs], axis=-1)
    return out.reshape(*out.shape[:-2], -1)


def _unpacked(data: np.ndarray, block_bytes: int) -> tuple[np.ndarray, np.ndarray]:
    """The f32 scales ``[..., n, 1]`` and the code bytes ``[..., n, block_bytes - 2]`` of ggml
    rows ``data`` ``[..., n * block_bytes]``."""
    b = np.asarray(data, dtype=np.uint8)
    b = b.reshape(*b.shape[:-1], -1, block_bytes)
    return np.ascontiguousarray(b[..., :2]).view("<f2").astype(F32), b[..., 2:]


def _roundf(x: np.ndarray) -> np.ndarray:
    """C's ``roundf``: to nearest, halves away from zero (exact for every float32)."""
    a = np.abs(x)
    whole = np.floor(a)
    return np.copysign(whole + np.floor((a - whole) * F32(2)), x)


def quantize_q8_0(x: np.ndarray) -> np.ndarray:
    """ggml's q8_0 of rows ``x`` (``D % 32 == 0``): ``[..., D / 32 * 34]`` bytes."""
    blocks = _blocks(x, "q8_0")
    d = (np.max(np.abs(blocks), axis=-1) / F32(127)).astype(F32)
    return _packed(d, _roundf(blocks * _inverse(d)[..., None]).astype(np.int8).view(np.uint8))


def dequantize_q8_0(data: np.ndarray) -> np.ndarray:
    """The f32 rows of q8_0 bytes ``[..., n * 34]``."""
    d, qs = _unpacked(data, Q8_0_BLOCK_BYTES)
    qs = np.ascontiguousarray(qs).view(np.int8).astype(F32)
    return (qs * d).reshape(*d.shape[:-2], -1)


def quantize_q4_0(x: np.ndarray) -> np.ndarray:
    """ggml's q4_0 of rows ``x`` (``D % 32 == 0``): ``[..., D / 32 * 18]`` bytes."""
    blocks = _blocks(x, "q4_0")
    first = np.argmax(np.abs(blocks), axis=-1)[..., None]  # the first of equal magnitudes
    d = (np.take_along_axis(blocks, first, axis=-1)[..., 0] / F32(-8)).astype(F32)
    v = blocks * _inverse(d)[..., None] + F32(8.5)
    nib = np.minimum(15, np.trunc(v).astype(np.int32)).astype(np.uint8)
    return _packed(d, nib[..., : QK // 2] | (nib[..., QK // 2 :] << np.uint8(4)))


def dequantize_q4_0(data: np.ndarray) -> np.ndarray:
    """The f32 rows of q4_0 bytes ``[..., n * 18]``."""
    d, qs = _unpacked(data, Q4_0_BLOCK_BYTES)
    nib = np.concatenate([qs & np.uint8(0xF), qs >> np.uint8(4)], axis=-1)
    return ((nib.astype(np.int32) - 8).astype(F32) * d).reshape(*d.shape[:-2], -1)


def words(data: np.ndarray) -> np.ndarray:
    """Bytes ``[..., n]`` as little-endian u32 words ``[..., ceil(n / 4)]``, the last word's
    missing bytes zero (a row's padding)."""
    b = np.asarray(data, dtype=np.uint8)
    pad = -b.shape[-1] % 4
    if pad:
        b = np.concatenate([b, np.zeros((*b.shape[:-1], pad), np.uint8)], axis=-1)
    return np.ascontiguousarray(b).view("<u4").astype(np.uint32)


def word_bytes(words_: np.ndarray, n: int) -> np.ndarray:
    """The first ``n`` bytes of little-endian u32 words ``[..., W]`` (:func:`words` undone)."""
    w = np.ascontiguousarray(np.asarray(words_, dtype=np.uint32)).astype("<u4")
    return w.view(np.uint8)[..., :n]


# ---- cache rows: the words a kernel stores per (token, head), and where the scales sit --------


@dataclass(frozen=True)
class Spec:
    """A format's parameters, all the reference needs of it: ``family`` (``twos``: symmetric,
    codes in two's complement as int8; ``offset``: symmetric, codes offset by ``2^(bits-1)``
    as int4; ``asymmetric``: codes ``0 .. 2^bits - 1`` over ``min .. max`` as int4_asym;
    ``q8_0``, ``q4_0``: ggml's blocks; ``ort_tq``: ONNX Runtime's norm and centroid indices)
    and ``bits`` per code; ``name`` for messages."""

    name: str
    family: str
    bits: int


FAMILIES = ("twos", "offset", "asymmetric", "q8_0", "q4_0", "ort_tq")
SPECS = {
    s.name: s
    for s in (
        Spec("int8", "twos", 8),
        Spec("int4", "offset", 4),
        Spec("int4_asym", "asymmetric", 4),
        Spec("q8_0", "q8_0", 8),
        Spec("q4_0", "q4_0", 4),
        Spec("ort_q4", "ort_tq", 4),
    )
}
DENSE = ("int8", "int4", "int4_asym")
GGML = ("q8_0", "q4_0")
FORMATS = DENSE + GGML
#: The formats stored in a basis of their own (:func:`own_rotation`), beside :data:`FORMATS`.
ROTATED = ("ort_q4",)
_BLOCK_BYTES = {"q8_0": Q8_0_BLOCK_BYTES, "q4_0": Q4_0_BLOCK_BYTES}


def spec(fmt: Any) -> Spec:
    """The :class:`Spec` of ``fmt``: a built-in's name, or any value with ``name``, ``family``
    and ``bits`` (a kernel format passes its parameters, never its code: the meaning of each
    family is stated here alone)."""
    if isinstance(fmt, Spec):
        return fmt
    if isinstance(fmt, str):
        if fmt not in SPECS:
            raise ValueError(f"format {fmt!r}: expected one of {', '.join(FORMATS + ROTATED)}")
        return SPECS[fmt]
    s = Spec(str(fmt.name), fmt.family, fmt.bits)
    if s.family not in FAMILIES:
        raise ValueError(f"format {s.name!r}: family {s.family!r}: expected one of {FAMILIES}")
    bad = (s.family in ("twos", "offset") and s.bits < 2) or (s.family == "ort_tq" and s.bits != 4)
    if s.bits not in (1, 2, 4, 8) or bad:
        raise ValueError(f"format {s.name!r}: bits={s.bits!r}: expected 1, 2, 4 or 8")
    return s


def own_rotation(fmt: Any) -> Callable[[np.ndarray], np.ndarray] | None:
    """The rotation ``fmt``'s rows are stored under, K's and V's alike (``ort_q4``: ORT's
    unsigned whole-head Walsh-Hadamard transform, in f32; its own inverse), None for the rest."""
    return ort_tq.hadamard if spec(fmt).family == "ort_tq" else None


def stored_basis(fmt: Any, x: np.ndarray) -> np.ndarray:
    """Rows of K or V (f32) in the basis ``fmt`` stores them in: through :func:`own_rotation`
    where it has one, else as given."""
    rotate = own_rotation(fmt)
    return x if rotate is None else rotate(np.asarray(x, F32))


def original_basis(fmt: Any, x: np.ndarray) -> np.ndarray:
    """Rows decoded in ``fmt``'s stored basis back in the rows' own (float64: the rotation of
    :func:`own_rotation` is its own inverse), or as given where ``fmt`` has none."""
    if own_rotation(fmt) is None:
        return x
    return rotation_of(x.shape[-1], signed=False).unrotate(np.asarray(x, np.float64))


def is_ggml(fmt: Any) -> bool:
    """Whether ``fmt``'s rows are ggml blocks (f16 scales inside them)."""
    return spec(fmt).family in GGML


def stat_words(fmt: Any) -> int:
    """The f32 words of a dense row's scale (an asymmetric format's: the scale and the zero
    point); 0 for ggml's blocks, whose f16 scales sit inside the blocks."""
    family = spec(fmt).family
    return 0 if family in GGML else 2 if family == "asymmetric" else 1


def row_words(fmt: Any, d: int, inline: bool) -> int:
    """The u32 words one cache row of ``d`` elements takes: a dense row's codes (``d * bits /
    32``), after its scale words when ``inline``; ggml's blocks padded to a whole word."""
    s = spec(fmt)
    if s.family in GGML:
        return -(-(d // QK * _BLOCK_BYTES[s.family]) // 4)
    return d * s.bits // 32 + (stat_words(s) if inline else 0)


def quantize_dense(x: np.ndarray, fmt: Any) -> Dense:
    """Rows ``x`` in the one-scale-per-row format ``fmt`` (its family and bits)."""
    s = spec(fmt)
    x = _rows(x, 32 // s.bits, s.name)
    if s.family == "ort_tq":
        norm = ort_tq.norms(x)
        return Dense(_pack(ort_tq.indices(x * _inverse(norm)[..., None]), s.bits), norm)
    if s.family == "asymmetric":
        qmax = (1 << s.bits) - 1
        lo, hi = np.min(x, axis=-1), np.max(x, axis=-1)
        scale = ((hi - lo) / F32(qmax)).astype(F32)
        q = np.rint((x - lo[..., None]) * _inverse(scale)[..., None])
        return Dense(_pack(np.clip(q, 0, qmax).astype(np.int32), s.bits), scale, lo.astype(F32))
    q, scale = _symmetric(x, (1 << (s.bits - 1)) - 1)
    if s.family == "twos":
        fields = q.astype(np.uint32) & np.uint32((1 << s.bits) - 1)
    else:
        fields = q + (1 << (s.bits - 1))
    return Dense(_pack(fields, s.bits), scale)


def dequantize_dense(
    fmt: Any, codes: np.ndarray, scale: np.ndarray, zero: np.ndarray | None = None
) -> np.ndarray:
    """The f32 rows of :func:`quantize_dense`'s words, scales and zero points."""
    s = spec(fmt)
    if s.family == "ort_tq":
        q = ort_tq.CENTROIDS[_unpack(codes, s.bits)]
    else:
        q = _signed_codes(s, _unpack(codes, s.bits)).astype(F32)
    out = q * np.asarray(scale, dtype=F32)[..., None]
    return out + np.asarray(zero, dtype=F32)[..., None] if s.family == "asymmetric" else out


def _signed_codes(s: Spec, fields: np.ndarray) -> np.ndarray:
    """A one-scale-per-row format's code values (int32) of its unsigned fields."""
    f = fields.astype(np.int32)
    if s.family == "twos":
        half = 1 << (s.bits - 1)
        return np.where(f >= half, f - (1 << s.bits), f)
    if s.family == "offset":
        return f - (1 << (s.bits - 1))
    return f


def quantize_rows(fmt: Any, x: np.ndarray, inline: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``x`` ``[..., D]`` in format ``fmt``: ``(words [..., row_words], side [..., S])``.

    Inline (ORT's layout), a dense row is its scale word (and zero-point word) as f32 bits, then
    its code words, and ``side`` is empty (``S = 0``); otherwise ``side`` holds them (``S`` =
    :func:`stat_words`). ggml's rows are their blocks' bytes as words (:func:`words`): inline by
    nature.
    """
    s = spec(fmt)
    x = np.asarray(x, dtype=F32)
    lead = x.shape[:-1]
    if s.family in GGML:
        q = quantize_q8_0(x) if s.family == "q8_0" else quantize_q4_0(x)
        return words(q), np.zeros((*lead, 0), F32)
    q = quantize_dense(x, s)
    stats = [q.scale] + ([q.zero] if q.zero is not None else [])
    side = np.stack(stats, axis=-1).astype(F32)
    if not inline:
        return q.words, side
    head = side.view(np.uint32)
    return np.concatenate([head, q.words], axis=-1), np.zeros((*lead, 0), F32)


def dequantize_rows(
    fmt: Any, words_: np.ndarray, side: np.ndarray | None, d: int, inline: bool = True
) -> np.ndarray:
    """The f32 rows ``[..., d]`` of :func:`quantize_rows`'s words (and side scales)."""
    s = spec(fmt)
    w = np.asarray(words_, dtype=np.uint32)
    if s.family in GGML:
        data = word_bytes(w, d // QK * _BLOCK_BYTES[s.family])
        return dequantize_q8_0(data) if s.family == "q8_0" else dequantize_q4_0(data)
    n = stat_words(s)
    if inline:
        stats, codes = np.ascontiguousarray(w[..., :n]).view(F32), w[..., n:]
    else:
        stats, codes = np.asarray(side, dtype=F32), w
    return dequantize_dense(s, codes, stats[..., 0], stats[..., 1] if n == 2 else None)


# ---- the dense modes --------------------------------------------------------------------------


@dataclass(frozen=True)
class DenseWritten:
    """A dense append's effect: cache words ``[B, H, capacity, W]`` of K and V and side scales
    ``[B, H, capacity, 2S]`` (K's ``S`` then V's), each with the mask of the rows written."""

    key: np.ndarray
    value: np.ndarray
    scales: np.ndarray
    rows: np.ndarray  # [B, H, capacity] bool

    def mask(self, a: np.ndarray) -> np.ndarray:
        """The written mask broadcast over ``a``'s last axis."""
        return np.broadcast_to(self.rows[..., None], a.shape).copy()


def dense_append(
    new_k: np.ndarray,
    new_v: np.ndarray,
    seqlens_k: np.ndarray,
    capacity: int,
    kv_heads: int,
    fmt: Any,
    inline: bool = True,
    rotary: Rotary | None = None,
    k_norm: KNorm | None = None,
    rotation: int = 0,
) -> DenseWritten:
    """New BSH tokens quantised into rows ``[end - S, end)`` of a buffer-sharing BNSH cache
    (:func:`kvdsl.reference.modes.share_window`), K RMS-normed with ``k_norm``, then rotated at
    its row with ``rotary``, then Walsh-Hadamard rotated over blocks of ``rotation``
    (:mod:`kvdsl.reference.rotation`; 0: not)."""
    k, v = split_heads(new_k, kv_heads).astype(F32), split_heads(new_v, kv_heads).astype(F32)
    s = k.shape[2]
    start, _ = share_window(seqlens_k, s, capacity)
    pos = (start[:, None] + np.arange(s))[:, None, :]
    if k_norm is not None:
        k = rms_norm(k, k_norm.weight, k_norm.eps)
    if rotary is not None:
        k = rotate_neox(k, pos, rotary.cos, rotary.sin, rotary.half)
    k, v = stored_basis(fmt, _hadamard(k, rotation)), stored_basis(fmt, v)
    return quantized_at(k, v, start, capacity, fmt, inline)


def _hadamard(k: np.ndarray, block: int) -> np.ndarray:
    """K rows rotated over blocks of ``block`` (f32, as a kernel computes them); 0: as given."""
    if not block:
        return k
    return rotation_of(k.shape[-1], block).rotate(np.asarray(k, F32))


def quantized_at(
    k: np.ndarray, v: np.ndarray, start: np.ndarray, capacity: int, fmt: Any, inline: bool
) -> DenseWritten:
    """BNSH f32 K and V (``S`` tokens per batch) quantised into rows ``[start[b], start[b] +
    S)`` of a dense cache of ``capacity`` rows per head; the other rows zero and unwritten."""
    b, h, s, _ = k.shape
    (wk, sk), (wv, sv) = quantize_rows(fmt, k, inline), quantize_rows(fmt, v, inline)
    out_k = np.zeros((b, h, capacity, wk.shape[-1]), np.uint32)
    out_v = np.zeros_like(out_k)
    side = np.zeros((b, h, capacity, sk.shape[-1] * 2), F32)
    rows = np.zeros((b, h, capacity), bool)
    for bi in range(b):
        at = slice(int(start[bi]), int(start[bi]) + s)
        out_k[bi, :, at], out_v[bi, :, at] = wk[bi], wv[bi]
        side[bi, :, at] = np.concatenate([sk[bi], sv[bi]], axis=-1)
        rows[bi, :, at] = True
    return DenseWritten(out_k, out_v, side, rows)


def dense_build(
    new_k: np.ndarray,
    new_v: np.ndarray,
    kv_heads: int,
    fmt: Any,
    inline: bool = True,
    past_seq: int = 0,
    rotary: Rotary | None = None,
    k_norm: KNorm | None = None,
    rotation: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """New BSH tokens quantised into a BNSH cache of their own: ``(key words, value words, side
    scales)``, ``[B, H, S, W]`` and ``[B, H, S, 2S]``; K normed, then rotated at ``past_seq +
    t``."""
    k, v = split_heads(new_k, kv_heads).astype(F32), split_heads(new_v, kv_heads).astype(F32)
    if k_norm is not None:
        k = rms_norm(k, k_norm.weight, k_norm.eps)
    if rotary is not None:
        pos = past_seq + np.arange(k.shape[2])[None, None, :]
        k = rotate_neox(k, pos, rotary.cos, rotary.sin, rotary.half)
    k, v = stored_basis(fmt, _hadamard(k, rotation)), stored_basis(fmt, v)
    (wk, sk), (wv, sv) = quantize_rows(fmt, k, inline), quantize_rows(fmt, v, inline)
    return wk, wv, np.concatenate([sk, sv], axis=-1)


def row_fields(
    fmt: Any, words_: np.ndarray, d: int, inline: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Stored rows ``[..., W]`` taken apart: ``(scales, codes)``, the scales as f32 ``[..., G]``
    (a dense inline row's scale and zero point, none for side scales; each ggml block's ``d``)
    and the codes as int32 ``[..., D]`` in element order (two's-complement bytes for int8 and
    q8_0, nibbles for the 4-bit formats), then a ggml row's padding bytes."""
    s = spec(fmt)
    w = np.asarray(words_, dtype=np.uint32)
    lead = w.shape[:-1]
    if s.family in GGML:
        bb = _BLOCK_BYTES[s.family]
        data = word_bytes(w, w.shape[-1] * 4)
        blocks = data[..., : d // QK * bb].reshape(*lead, -1, bb)
        scales = np.ascontiguousarray(blocks[..., :2]).view("<f2")[..., 0].astype(F32)
        qs = blocks[..., 2:]
        if s.family == "q8_0":
            codes = qs.view(np.int8).astype(np.int32)
        else:
            codes = np.concatenate([qs & 0xF, qs >> 4], axis=-1).astype(np.int32)
        pad = data[..., d // QK * bb :].astype(np.int32)
        return scales, np.concatenate([codes.reshape(*lead, -1), pad], axis=-1)
    n = stat_words(s) if inline else 0
    scales = np.ascontiguousarray(w[..., :n]).view(F32)
    fields = _unpack(np.ascontiguousarray(w[..., n:]), s.bits).astype(np.int32)
    return scales, _signed_codes(s, fields) if s.family == "twos" else fields
