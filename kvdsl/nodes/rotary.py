"""NeoX rotary embedding at an absolute position.

For a row ``x`` of ``2*half`` elements and position ``p``, with ``c = cos[p*half + d]`` and
``s = sin[p*half + d]`` for ``d < half`` (or, from one packed table, ``c = table[2*p*half + d]``
and ``s = table[2*p*half + half + d]``)::

    x'[d]        = x[d] * c - x[d + half] * s
    x'[d + half] = x[d + half] * c + x[d] * s

A row longer than ``2*half`` (partial rotary: Phi-2, GPT-NeoX) keeps its elements from
``2*half`` on as they are (:attr:`Rotation.partial`).

Forms: :func:`rotate_row` rotates a row held in a function-scope ``var`` array (the per-row
walk); :func:`rotate_loaded` computes one output element (or vector) from its loads, the pair
``(d mod half, d mod half + half)`` sharing one cos/sin entry (the flat and block walks, through
:func:`rotate`); :func:`move_rotated_pair` rotates and stores both vectors of a pair (the pair
walk); :func:`rotate_with_partner` rotates a lane's vector with its partner loaded beside it,
:func:`rotate_lane_pairs` a lane that holds both vectors of its pairs (the quantiser's lanes,
dense, paged and fused alike). The vector forms compute exactly what the scalar ones do, lane by
lane, in the same order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from kvdsl.ir import Buffer, KernelBuilder, Local, Val, select
from kvdsl.ir.builder import as_val
from kvdsl.nodes.words import as_f32, to


@dataclass(frozen=True)
class Rotation:
    """A rotation at position ``pos``: the ``cos``/``sin`` tables of ``half`` entries (or
    vectors) per position; ``partial``: the row is longer than ``2 * half`` and its elements
    from there on pass through; ``packed``: ``cos`` and ``sin`` are one table (the same binding)
    holding per position ``half`` cos entries, then ``half`` sin entries."""

    cos: Buffer
    sin: Buffer
    pos: Val
    half: Val
    partial: bool = False
    packed: bool = False

    def entry(
        self,
        kb: KernelBuilder,
        dr: Val,
        tag: str = "",
        j: int | None = None,
        let_index: bool = False,
    ) -> tuple[Val, Val]:
        """``(cs, sn)``: the cos/sin entry of pair ``dr`` (``dr < half``) at ``pos``, named
        ``{tag}cs{j}`` and ``{tag}sn{j}`` (``j``: a lane's ``j``-th vector); ``let_index``: a
        packed table's index is a let of its own, ``{tag}tableAt{j}``."""
        n = "" if j is None else str(j)
        if self.packed:
            at = self.pos * (self.half * 2) + dr
            if let_index:
                at = kb.let(f"{tag}tableAt{n}", at)
            cs = kb.let(f"{tag}cs{n}", self.cos[at])
            sn = kb.let(f"{tag}sn{n}", self.sin[at + self.half])
            return cs, sn
        cs = kb.let(f"{tag}cs{n}", self.cos[self.pos * self.half + dr])
        sn = kb.let(f"{tag}sn{n}", self.sin[self.pos * self.half + dr])
        return cs, sn

    def keep_tail(self, own: Val | Callable[[], Val], rotated: Val, d: Val) -> Val:
        """Element (or vector) ``d`` of the row: ``rotated``, or with a partial rotary ``own``
        (the element as it is; a callable makes it only then) past the rotated part, ``d >= 2 *
        half``: the one statement of what a partial rotary leaves."""
        if not self.partial:
            return rotated
        return select(own() if callable(own) else own, rotated, d < self.half * 2)


def rotate_row(kb: KernelBuilder, row: Local, rot: Rotation) -> None:
    """Rotate the f32 ``var`` array ``row`` in place."""
    half = rot.half
    with kb.for_range("d", as_val(0, half.ty), half) as d:
        cs, sn = rot.entry(kb, d)
        x0 = kb.let("x0", row[d])
        x1 = kb.let("x1", row[d + half])
        row[d], row[d + half] = rotated_pair(x0, x1, cs, sn)


def rotate_loaded(
    kb: KernelBuilder, load: Callable[[Val], Val], d: Val, rot: Rotation, j: int | None = None
) -> Val:
    """Element (or vector) ``d`` of the rotated row whose entry ``i`` is ``load(i)`` (f32).

    ``d % half`` picks the pair without the u32 wrap of ``d - half`` for ``d < half``; the pair
    ``(d % half, d % half + half)`` shares one cos/sin entry. Scalar or vector alike: with
    vectors, ``half`` counts vectors and the vector lies in one half of the row. With
    ``rot.partial``, element ``d`` past ``2 * half`` is ``load(d)`` as it is (the pair's loads
    stay in range: ``d % half`` is a pair of the rotated part). ``j``: the lets are a lane's
    ``j``-th vector's (``dr{j}``, ``cs{j}``, ``sn{j}``, ``x{j}Lo``, ``x{j}Hi``, ``x{j}Own``).
    """
    dr, cs, sn = pair_entry(kb, d, rot, j)
    lo, hi, own = ("x0", "x1", "xOwn") if j is None else (f"x{j}Lo", f"x{j}Hi", f"x{j}Own")
    x0 = kb.let(lo, load(dr))
    x1 = kb.let(hi, load(dr + rot.half))
    rotated = rotate_pair(x0, x1, cs, sn, d, rot.half)
    return rot.keep_tail(lambda: kb.let(own, load(d)), rotated, d)


def pair_entry(
    kb: KernelBuilder, d: Val, rot: Rotation, j: int | None = None
) -> tuple[Val, Val, Val]:
    """``(dr, cs, sn)`` for element (or vector) ``d``: its pair's first index ``d % half`` (no
    u32 wrap of ``d - half``) and the pair's cos/sin entry (named for a lane's ``j``-th
    vector)."""
    dr = kb.let("dr" if j is None else f"dr{j}", d % rot.half)
    return (dr, *rot.entry(kb, dr, "", j))


def rotate_pair(x0: Val, x1: Val, cs: Val, sn: Val, d: Val, half: Val) -> Val:
    """Element ``d`` of the rotated pair ``(x0, x1)`` = row ``(d mod half, d mod half + half)``:
    ``x0*cs - x1*sn`` in the first half, ``x1*cs + x0*sn`` in the second."""
    first, second = rotated_pair(x0, x1, cs, sn)
    return select(second, first, d < half)


def rotated_pair(x0: Val, x1: Val, cs: Val, sn: Val) -> tuple[Val, Val]:
    """The NeoX rotation of the pair ``(x0, x1)``: ``(x0*cs - x1*sn, x1*cs + x0*sn)``, element
    for element the products of :func:`rotate` (which keeps one of them through a ``select``)."""
    return x0 * cs - x1 * sn, x1 * cs + x0 * sn


def rotate_with_partner(
    kb: KernelBuilder,
    own: Val,
    at: Val,
    partner_of: Callable[[Val], Val],
    rot: Rotation,
    j: int,
    stems: tuple[str, str] = ("kAt", "kDr"),
) -> Val:
    """A lane's ``j``-th vector ``own`` (the row's vector ``at``), rotated: its partner's index
    ``(at + half) % (2 * half)`` (``{stems[0]}{j}Pair``), whose value ``partner_of`` gives
    (loaded, normed and named by the caller), the pair's entry (``{stems[1]}{j}``, ``cs{j}``,
    ``sn{j}``) and the product of :func:`rotate_pair`, ``k{j}``. With ``rot.partial`` a vector
    past the rotated part (``at >= 2 * half``) is ``own`` as it is; the loads its pair makes
    stay in range (its partner and entry are a rotated vector's)."""
    h = rot.half
    partner = kb.let(f"{stems[0]}{j}Pair", (at + h) % (h * 2))
    p = partner_of(partner)
    lo = at < h
    dr = kb.let(f"{stems[1]}{j}", at % h)
    cs, sn = rot.entry(kb, dr, "", j, let_index=True)
    rotated = rotate_pair(select(p, own, lo), select(own, p, lo), cs, sn, at, h)
    return kb.let(f"k{j}", rot.keep_tail(own, rotated, at))


def rotate_lane_pairs(
    kb: KernelBuilder,
    own: list[Val],
    first: Callable[[int], Val],
    rot: Rotation,
    out: str = "k",
    tag: str = "",
) -> list[Val]:
    """A lane whose vectors ``j`` and ``j + m`` (``m`` half its vectors) are NeoX pairs (a
    quantiser's paired runs, a strided Q row): each pair rotated with one entry, that of the
    row's vector ``first(j)`` (in the first half of the row), named ``{out}{j}`` and
    ``{out}{j + m}`` (the entry: ``{tag}cs{j}``, ``{tag}sn{j}``). The whole head rotates: the
    pairs are half a row apart."""
    m = len(own) // 2
    res: list[Val | None] = [None] * len(own)
    for j in range(m):
        cs, sn = rot.entry(kb, first(j), tag, j, let_index=True)
        lo, hi = rotated_pair(own[j], own[j + m], cs, sn)
        res[j] = kb.let(f"{out}{j}", lo)
        res[j + m] = kb.let(f"{out}{j + m}", hi)
    return res


def rotate(kb: KernelBuilder, src: Buffer, row_base: Val, d: Val, rot: Rotation) -> Val:
    """Vector ``d`` of the NeoX-rotated row at ``src[row_base]``, in f32 lanes.

    ``half`` counts vectors (``HALF_V4``); the vector lies in one half of the row, its partner at
    ``d ± half`` and its cos/sin at ``pos * half + d % half``. Lane for lane what
    :func:`rotate_loaded` computes on scalars.
    """
    return rotate_loaded(kb, lambda i: as_f32(kb, src[row_base + i]), d, rot)


def move_rotated_pair(
    kb: KernelBuilder,
    k: Buffer,
    v: Buffer,
    src_base: Val,
    dr: Val,
    rot: Rotation,
    k_out: Buffer,
    v_out: Buffer,
    dst: Val | Callable[[], Val],
) -> None:
    """The pair walk's row program: vectors ``dr`` and ``dr + half`` of K, NeoX-rotated, and of
    V, from the rows at ``src_base`` to ``k_out``/``v_out`` at ``dst`` and ``dst + half``.

    ``rot.half`` counts vectors (``dr < half``). K's lanes are the products of :func:`rotate`,
    element for element (``x0 * cs - x1 * sn`` and ``x1 * cs + x0 * sn``, no ``select``),
    converted to each output's element type. Every load comes before any store; ``dst`` may be
    a callable, declared after the loads.
    """
    half = rot.half
    cs, sn = rot.entry(kb, dr)
    x0 = kb.let("x0", as_f32(kb, k[src_base + dr]))
    x1 = kb.let("x1", as_f32(kb, k[src_base + (dr + half)]))
    v0, v1 = kb.let("v0", v[src_base + dr]), kb.let("v1", v[src_base + (dr + half)])
    at = dst() if callable(dst) else dst
    for out, lo, hi in ((k_out, *rotated_pair(x0, x1, cs, sn)), (v_out, v0, v1)):
        ty = out.binding.elem
        out[at] = to(kb, ty, lo)
        out[at + half] = to(kb, ty, hi)


def move_new(
    kb: KernelBuilder,
    k: Buffer,
    v: Buffer,
    src_base: Val,
    d: Val,
    rot: Rotation | None,
    k_out: Buffer,
    v_out: Buffer,
    dst: Val,
    pairs: bool,
) -> None:
    """An appending walk's program for one new row: vector ``d`` of K and V from the rows at
    ``src_base`` to ``k_out``/``v_out`` at ``dst``, K NeoX-rotated where ``rot`` is given,
    converted to each output's element type; on the pair walk (``pairs``) the pair ``d``,
    ``d + half`` (:func:`move_rotated_pair`)."""
    if pairs:
        move_rotated_pair(kb, k, v, src_base, d, rot, k_out, v_out, dst)
        return
    key = k[src_base + d] if rot is None else rotate(kb, k, src_base, d, rot)
    k_out[dst] = to(kb, k_out.binding.elem, key)
    v_out[dst] = to(kb, v_out.binding.elem, v[src_base + d])
