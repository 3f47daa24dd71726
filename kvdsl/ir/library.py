"""numpy implementations of WGSL's numeric, bit and packing builtins, with WGSL's semantics.

The op table (:mod:`kvdsl.ir.ops`) holds one row per builtin; the rows of the library past the
arithmetic core point here. Every function takes numpy arrays whose last axis holds a vector's
components (a scalar has no such axis) and returns the result's dtype exactly as WGSL types it:
``u32`` as ``uint32``, ``i32`` as ``int32``, ``f32`` as ``float32``, ``f16`` as ``float16``.

Integer builtins are exact. Float builtins compute in their type's precision (``fract`` is
``e - floor(e)`` in f32, as WGSL defines it); the ones WGSL gives an accuracy in ULP or
"inherited from" a formula are marked ``approximate`` in the table and compared within it.
"""

from __future__ import annotations

import numpy as np

_U32 = np.uint32
_ONES = np.uint64(0xFFFFFFFF)


def _bits(x: np.ndarray) -> np.ndarray:
    """The 32 bits of an i32 or u32 array as uint32."""
    return np.asarray(x).astype(np.uint32, copy=False) if x.dtype == np.uint32 else x.view(_U32)


def _as(bits: np.ndarray, like: np.ndarray) -> np.ndarray:
    """uint32 ``bits`` read as ``like``'s integer type."""
    bits = np.ascontiguousarray(bits, dtype=_U32)
    return bits if like.dtype == np.uint32 else bits.view(np.int32)


# ---- bits --------------------------------------------------------------------------------------


def count_one_bits(x: np.ndarray) -> np.ndarray:
    """``countOneBits``: how many bits are 1."""
    return _as(np.bitwise_count(_bits(x)).astype(_U32), x)


def _clz(b: np.ndarray) -> np.ndarray:
    """Leading zero bits of uint32 ``b`` (32 for 0), by halving the window."""
    b = b.astype(np.uint64)
    n = np.zeros(b.shape, np.uint64)
    for shift in (16, 8, 4, 2, 1):
        s = np.uint64(shift)
        top = (b >> (np.uint64(32) - s)) == 0  # the top `shift` bits of the window are zero
        n += np.where(top, s, np.uint64(0))
        b = np.where(top, (b << s) & _ONES, b)
    n += (b >> np.uint64(31)) == 0  # the last bit
    return n.astype(_U32)


def _ctz(b: np.ndarray) -> np.ndarray:
    """Trailing zero bits of uint32 ``b`` (32 for 0)."""
    low = (b & (~b + _U32(1))).astype(_U32)  # the lowest set bit alone
    return np.where(b == 0, _U32(32), _U32(31) - _clz(low)).astype(_U32)


def count_leading_zeros(x: np.ndarray) -> np.ndarray:
    """``countLeadingZeros``: zero bits above the highest 1 (32 for 0)."""
    return _as(_clz(_bits(x)), x)


def count_trailing_zeros(x: np.ndarray) -> np.ndarray:
    """``countTrailingZeros``: zero bits below the lowest 1 (32 for 0)."""
    return _as(_ctz(_bits(x)), x)


def first_leading_bit(x: np.ndarray) -> np.ndarray:
    """``firstLeadingBit``: for u32 the index of the highest 1 (``0xffffffff`` for 0); for i32
    the index of the highest bit that differs from the sign bit (-1 for 0 and -1)."""
    b = _bits(x)
    if x.dtype == np.int32:
        b = np.where(x < 0, ~b, b).astype(_U32)
    none = b == 0
    idx = (_U32(31) - _clz(b)).astype(_U32)
    return _as(np.where(none, _U32(0xFFFFFFFF), idx), x)


def first_trailing_bit(x: np.ndarray) -> np.ndarray:
    """``firstTrailingBit``: the index of the lowest 1, all ones (-1 for i32) for 0."""
    b = _bits(x)
    return _as(np.where(b == 0, _U32(0xFFFFFFFF), _ctz(b)), x)


def reverse_bits(x: np.ndarray) -> np.ndarray:
    """``reverseBits``: bit k moves to bit 31 - k."""
    b = _bits(x).astype(_U32, copy=True)
    for shift, mask in (
        (1, 0x55555555),
        (2, 0x33333333),
        (4, 0x0F0F0F0F),
        (8, 0x00FF00FF),
        (16, 0x0000FFFF),
    ):
        s, m = _U32(shift), _U32(mask)
        b = ((b >> s) & m) | ((b & m) << s)
    return _as(b, x)


def _span(offset: np.ndarray, count: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """WGSL's ``o = min(offset, 32)`` and ``c = min(count, 32 - o)`` as uint64."""
    o = np.minimum(np.asarray(offset).astype(np.uint64), np.uint64(32))
    c = np.minimum(np.asarray(count).astype(np.uint64), np.uint64(32) - o)
    return o, c


def extract_bits(e: np.ndarray, offset: np.ndarray, count: np.ndarray) -> np.ndarray:
    """``extractBits(e, offset, count)``: bits ``[o, o + c)`` of ``e`` in the low bits, zero
    above for u32 and copies of the field's top bit above for i32; 0 when ``c`` is 0."""
    o, c = _span(offset, count)
    b = _bits(e).astype(np.uint64)
    field = (b >> o) & ((np.uint64(1) << c) - np.uint64(1))
    if e.dtype == np.int32:
        top = np.where(c > 0, (field >> np.maximum(c, np.uint64(1)) - np.uint64(1)) & 1, 0)
        high = (_ONES << c) & _ONES
        field = np.where(top.astype(bool), field | high, field)
    return _as((field & _ONES).astype(_U32), e)


def insert_bits(
    e: np.ndarray, new: np.ndarray, offset: np.ndarray, count: np.ndarray
) -> np.ndarray:
    """``insertBits(e, newbits, offset, count)``: ``e`` with bits ``[o, o + c)`` replaced by the
    low ``c`` bits of ``newbits``."""
    o, c = _span(offset, count)
    mask = (((np.uint64(1) << c) - np.uint64(1)) << o) & _ONES
    b, n = _bits(e).astype(np.uint64), _bits(new).astype(np.uint64)
    out = (b & ~mask & _ONES) | ((n << o) & mask)
    return _as(out.astype(_U32), e)


# ---- 4x8 packed integers -----------------------------------------------------------------------


def _bytes(w: np.ndarray) -> np.ndarray:
    """The four bytes of each u32 word, byte 0 (lowest) first, along a new last axis."""
    w = np.asarray(w, _U32)
    return np.stack([(w >> _U32(8 * k)) & _U32(0xFF) for k in range(4)], axis=-1)


def _signed_bytes(w: np.ndarray) -> np.ndarray:
    return _bytes(w).astype(np.uint8).view(np.int8).astype(np.int32)


def unpack4x_i8(w: np.ndarray) -> np.ndarray:
    """``unpack4xI8``: each byte sign-extended to i32, byte 0 in component 0."""
    return _signed_bytes(w)


def unpack4x_u8(w: np.ndarray) -> np.ndarray:
    """``unpack4xU8``: each byte zero-extended to u32, byte 0 in component 0."""
    return _bytes(w)


def _pack_bytes(v: np.ndarray) -> np.ndarray:
    b = _bits(v) & _U32(0xFF)
    return b[..., 0] | (b[..., 1] << _U32(8)) | (b[..., 2] << _U32(16)) | (b[..., 3] << _U32(24))


def pack4x_i8(v: np.ndarray) -> np.ndarray:
    """``pack4xI8``: the low 8 bits of each i32 component, component 0 in the low byte."""
    return _pack_bytes(v)


def pack4x_u8(v: np.ndarray) -> np.ndarray:
    """``pack4xU8``: the low 8 bits of each u32 component, component 0 in the low byte."""
    return _pack_bytes(v)


def pack4x_i8_clamp(v: np.ndarray) -> np.ndarray:
    """``pack4xI8Clamp``: each component clamped to [-128, 127], then packed."""
    return _pack_bytes(np.clip(v, -128, 127).astype(np.int32))


def pack4x_u8_clamp(v: np.ndarray) -> np.ndarray:
    """``pack4xU8Clamp``: each component clamped to [0, 255], then packed."""
    return _pack_bytes(np.minimum(v, _U32(255)).astype(_U32))


def dot4_i8_packed(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``dot4I8Packed``: the dot product of the four signed bytes of ``a`` and of ``b`` (i32;
    it cannot overflow)."""
    return np.sum(_signed_bytes(a) * _signed_bytes(b), axis=-1, dtype=np.int32)


def dot4_u8_packed(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``dot4U8Packed``: the dot product of the four unsigned bytes of ``a`` and of ``b``."""
    return np.sum(_bytes(a) * _bytes(b), axis=-1, dtype=_U32)


# ---- normalised packing ------------------------------------------------------------------------


def _pack_norm(v: np.ndarray, scale: int, lo: float, width: int) -> np.ndarray:
    """``floor(0.5 + scale * clamp(e, lo, 1))`` per component in f32, as a ``width``-bit field,
    component 0 lowest: WGSL's formula for the snorm and unorm packings."""
    v = np.asarray(v, np.float32)
    with np.errstate(invalid="ignore"):
        q = np.floor(
            np.float32(0.5) + np.float32(scale) * np.clip(v, np.float32(lo), np.float32(1))
        )
    fields = q.astype(np.int64).astype(np.uint64) & np.uint64((1 << width) - 1)
    out = np.zeros(v.shape[:-1], np.uint64)
    for k in range(v.shape[-1]):
        out |= fields[..., k] << np.uint64(width * k)
    return out.astype(_U32)


def _unpack_norm(w: np.ndarray, scale: int, signed: bool, width: int) -> np.ndarray:
    """Each ``width``-bit field of ``w`` (field 0 lowest) over ``scale`` in f32; a signed field
    is at least -1 (WGSL: ``max(v / scale, -1)``)."""
    w = np.asarray(w, _U32).astype(np.int64)
    n = 32 // width
    fields = np.stack([(w >> (width * k)) & ((1 << width) - 1) for k in range(n)], axis=-1)
    if signed:
        fields = np.where(fields >= 1 << (width - 1), fields - (1 << width), fields)
    out = fields.astype(np.float32) / np.float32(scale)
    return np.maximum(out, np.float32(-1)) if signed else out


def pack4x8snorm(v: np.ndarray) -> np.ndarray:
    return _pack_norm(v, 127, -1.0, 8)


def pack4x8unorm(v: np.ndarray) -> np.ndarray:
    return _pack_norm(v, 255, 0.0, 8)


def pack2x16snorm(v: np.ndarray) -> np.ndarray:
    return _pack_norm(v, 32767, -1.0, 16)


def pack2x16unorm(v: np.ndarray) -> np.ndarray:
    return _pack_norm(v, 65535, 0.0, 16)


def unpack4x8snorm(w: np.ndarray) -> np.ndarray:
    return _unpack_norm(w, 127, True, 8)


def unpack4x8unorm(w: np.ndarray) -> np.ndarray:
    return _unpack_norm(w, 255, False, 8)


def unpack2x16snorm(w: np.ndarray) -> np.ndarray:
    return _unpack_norm(w, 32767, True, 16)


def unpack2x16unorm(w: np.ndarray) -> np.ndarray:
    return _unpack_norm(w, 65535, False, 16)


# ---- floats ------------------------------------------------------------------------------------


def _in(f):
    """``f`` with float warnings off and its result in the first operand's dtype."""

    def run(x: np.ndarray, *rest: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            return np.asarray(f(x, *rest)).astype(x.dtype, copy=False)

    run.__doc__ = f.__doc__
    return run


@_in
def sign(x: np.ndarray) -> np.ndarray:
    """``sign``: -1, 0 or 1 (for floats, 0 for either zero)."""
    if x.dtype.kind == "i":
        return np.sign(x)
    return np.where(x > 0, 1, np.where(x < 0, -1, 0))


@_in
def fract(x: np.ndarray) -> np.ndarray:
    """``fract(e) = e - floor(e)`` in the type's precision (1.0 for a tiny negative ``e``)."""
    return x - np.floor(x)


@_in
def step(edge: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``step(edge, x)``: 1.0 where ``edge <= x``, else 0.0."""
    return np.where(edge <= x, 1, 0)


@_in
def smoothstep(lo: np.ndarray, hi: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``smoothstep(low, high, x)``: ``t * t * (3 - 2 t)`` with ``t = clamp((x - low) / (high -
    low), 0, 1)``."""
    one, two, three = (x.dtype.type(v) for v in (1, 2, 3))
    t = np.clip(((x - lo) / (hi - lo)).astype(x.dtype), x.dtype.type(0), one)
    return t * t * (three - two * t)


@_in
def mix(a: np.ndarray, b: np.ndarray, t: np.ndarray) -> np.ndarray:
    """``mix(a, b, t) = a * (1 - t) + b * t``."""
    return a * (a.dtype.type(1) - t) + b * t


@_in
def saturate(x: np.ndarray) -> np.ndarray:
    """``saturate``: ``clamp(e, 0, 1)``."""
    return np.minimum(np.maximum(x, x.dtype.type(0)), x.dtype.type(1))


@_in
def degrees(x: np.ndarray) -> np.ndarray:
    return x * x.dtype.type(57.295779513082322865)


@_in
def radians(x: np.ndarray) -> np.ndarray:
    return x * x.dtype.type(0.017453292519943295)


@_in
def ldexp(x: np.ndarray, e: np.ndarray) -> np.ndarray:
    """``ldexp(e1, e2) = e1 * 2^e2`` (exact where the result is finite and normal)."""
    return np.ldexp(x, np.clip(e, -1000, 1000).astype(np.int32))


@_in
def quantize_to_f16(x: np.ndarray) -> np.ndarray:
    """``quantizeToF16``: the f32 rounded to f16 (nearest, ties to even) and widened back."""
    return x.astype(np.float16).astype(np.float32)


@_in
def length(x: np.ndarray) -> np.ndarray:
    """``length``: ``sqrt(dot(e, e))`` of a vector, ``abs(e)`` of a scalar. A vector's values
    are two-dimensional (invocations × components) in the interpreter, a scalar's one."""
    if x.ndim < 2:
        return np.abs(x)
    return np.sqrt(np.sum(x * x, axis=-1, dtype=x.dtype))


@_in
def distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``distance(a, b) = length(a - b)``."""
    return length((a - b).astype(a.dtype, copy=False))


@_in
def normalize(x: np.ndarray) -> np.ndarray:
    """``normalize``: ``e / length(e)``."""
    return x / np.sqrt(np.sum(x * x, axis=-1, dtype=x.dtype, keepdims=True))


@_in
def cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``cross`` of two 3-vectors."""
    return np.cross(a, b)


def _dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``dot(a, b)`` of vectors, kept as a length-1 last axis (so it scales a vector)."""
    return np.sum(a * b, axis=-1, keepdims=True, dtype=a.dtype)


@_in
def reflect(e1: np.ndarray, e2: np.ndarray) -> np.ndarray:
    """``reflect(e1, e2) = e1 - 2 * dot(e2, e1) * e2``."""
    return e1 - e1.dtype.type(2) * _dot(e2, e1) * e2


@_in
def refract(e1: np.ndarray, e2: np.ndarray, e3: np.ndarray) -> np.ndarray:
    """``refract(e1, e2, e3)``: with ``k = 1 - e3 * e3 * (1 - dot(e2, e1) * dot(e2, e1))``, the
    zero vector where ``k < 0``, else ``e3 * e1 - (e3 * dot(e2, e1) + sqrt(k)) * e2``."""
    eta = e3.astype(e1.dtype, copy=False)
    if eta.ndim < e1.ndim:
        eta = eta[..., None]
    d = _dot(e2, e1)
    one = e1.dtype.type(1)
    k = one - eta * eta * (one - d * d)
    out = eta * e1 - (eta * d + np.sqrt(np.maximum(k, 0))) * e2
    return np.where(k < 0, e1.dtype.type(0), out)


@_in
def face_forward(e1: np.ndarray, e2: np.ndarray, e3: np.ndarray) -> np.ndarray:
    """``faceForward(e1, e2, e3)``: ``e1`` where ``dot(e2, e3) < 0``, else ``-e1``."""
    return np.where(_dot(e2, e3) < 0, e1, -e1)


@_in
def atan2(y: np.ndarray, x: np.ndarray) -> np.ndarray:
    return np.arctan2(y, x)


@_in
def power(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``pow(e1, e2)``: NaN for a negative base, as ``exp2(e2 * log2(e1))`` gives."""
    return np.where(x < 0, np.nan, np.power(x, y))


def all_(x: np.ndarray) -> np.ndarray:
    """``all`` of a bool vector (the last axis)."""
    return np.all(x, axis=-1)


def any_(x: np.ndarray) -> np.ndarray:
    """``any`` of a bool vector (the last axis)."""
    return np.any(x, axis=-1)


def frexp(x: np.ndarray) -> dict[str, np.ndarray]:
    """``frexp(e)``: the fields of its result struct, ``fract`` in [0.5, 1) in magnitude with
    ``e``'s sign and ``exp`` (i32) with ``e == fract * 2^exp``; both 0 for a zero (the sign kept
    in ``fract``). Subnormal ``e`` are exact here (a GPU may flush them to zero first)."""
    with np.errstate(all="ignore"):
        fract, exp = np.frexp(x)
    return {"fract": fract.astype(x.dtype, copy=False), "exp": exp.astype(np.int32)}


def modf(x: np.ndarray) -> dict[str, np.ndarray]:
    """``modf(e)``: the fields of its result struct as WGSL defines them, ``whole`` =
    ``trunc(e)`` and ``fract`` = ``e - trunc(e)`` in ``e``'s type (``modf(-1.5)`` is ``-0.5``
    and ``-1.0``; ``modf(-2.0).fract`` is +0.0, where C's modf keeps the sign)."""
    with np.errstate(all="ignore"):
        whole = np.trunc(x)
        fract = x - whole
    return {"fract": fract.astype(x.dtype, copy=False), "whole": whole.astype(x.dtype, copy=False)}
