"""NeoX rotary embedding at an absolute position.

For a row ``x`` of ``2*half`` elements and position ``p``, with ``c = cos[p*half + d]`` and
``s = sin[p*half + d]`` for ``d < half``::

    x'[d]        = x[d] * c - x[d + half] * s
    x'[d + half] = x[d + half] * c + x[d] * s

Two forms: :func:`rotate_row` rotates a row held in a function-scope ``var`` array (the per-row
walk); :func:`rotate_loaded` computes one output element (or vector) from its loads, the pair
``(d mod half, d mod half + half)`` sharing one cos/sin entry (the flat and block walks, through
:func:`kvdsl.nodes.flat.rotate`).
"""

from __future__ import annotations

from typing import Callable

from kvdsl.ir import Buffer, KernelBuilder, Local, Val, select
from kvdsl.ir.builder import as_val


def rotate_row(
    kb: KernelBuilder, row: Local, cos: Buffer, sin: Buffer, pos: Val, half: Val
) -> None:
    """Rotate the f32 ``var`` array ``row`` in place at position ``pos``."""
    with kb.for_range("d", as_val(0, half.ty), half) as d:
        cs = kb.let("cs", cos[pos * half + d])
        sn = kb.let("sn", sin[pos * half + d])
        x0 = kb.let("x0", row[d])
        x1 = kb.let("x1", row[d + half])
        row[d] = x0 * cs - x1 * sn
        row[d + half] = x1 * cs + x0 * sn


def rotate_loaded(
    kb: KernelBuilder,
    load: Callable[[Val], Val],
    d: Val,
    cos: Buffer,
    sin: Buffer,
    pos: Val,
    half: Val,
) -> Val:
    """Element (or vector) ``d`` of the rotated row whose entry ``i`` is ``load(i)`` (f32).

    ``d % half`` picks the pair without the u32 wrap of ``d - half`` for ``d < half``; the pair
    ``(d % half, d % half + half)`` shares one cos/sin entry. Scalar or vector alike: with
    vectors, ``half`` counts vectors and the vector lies in one half of the row.
    """
    dr, cs, sn = pair_entry(kb, d, cos, sin, pos, half)
    x0 = kb.let("x0", load(dr))
    x1 = kb.let("x1", load(dr + half))
    return rotate_pair(x0, x1, cs, sn, d, half)


def pair_entry(
    kb: KernelBuilder, d: Val, cos: Buffer, sin: Buffer, pos: Val, half: Val
) -> tuple[Val, Val, Val]:
    """``(dr, cs, sn)`` for element (or vector) ``d``: its pair's first index ``d % half`` (no
    u32 wrap of ``d - half``) and the pair's cos/sin entry at position ``pos``."""
    dr = kb.let("dr", d % half)
    cs = kb.let("cs", cos[pos * half + dr])
    sn = kb.let("sn", sin[pos * half + dr])
    return dr, cs, sn


def rotate_pair(x0: Val, x1: Val, cs: Val, sn: Val, d: Val, half: Val) -> Val:
    """Element ``d`` of the rotated pair ``(x0, x1)`` = row ``(d mod half, d mod half + half)``:
    ``x0*cs - x1*sn`` in the first half, ``x1*cs + x0*sn`` in the second."""
    return select(x1 * cs + x0 * sn, x0 * cs - x1 * sn, d < half)
