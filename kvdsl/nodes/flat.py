"""The flat walk: one invocation per destination vector (``vec4``, or one element), no loops.

A span of ``rows`` contiguous rows of ``per_row`` vectors each is walked by ``rows * per_row``
invocations: invocation ``e`` of the folded dispatch owns vector ``d = e % per_row`` of row
``e / per_row``. Adjacent invocations touch adjacent vectors of the destination, a workgroup
covers ``WG / per_row`` whole rows when ``WG`` divides by ``per_row``, and every invocation makes
one memory round trip (a per-row walk's loop of ``per_row`` dependent iterations is
latency-bound; a 1-token decode append spreads over ``kvHeads * per_row`` invocations instead of
``kvHeads``).

The vector width (:func:`lanes`) is 4 when the row length divides by 4 (by 8 for rotary, so that
a vector lies inside one half of the row and its cos/sin entries are one ``vec4`` too), else 1:
bindings then hold ``vec4<T>`` (``vec2<u32>`` for packed int4 words) and the kernel's host-side
extents count vectors (:func:`vector_extents`). A walk that only moves f16 data (:func:`width`)
takes eight halves per invocation as one ``vec4<u32>`` (:data:`WORDS`) when the row divides by 8:
its bindings (:func:`binding`) keep f16 as the host's type, and the module needs no ``enable
f16;``. Four halves a walk computes on travel the same way as ``vec2<u32>`` (:data:`HALVES`),
unpacked by :func:`as_f32` and packed by :func:`to`, so no flat kernel enables f16. The
dispatch rule is ``rows * per_row`` items, ``WG`` per workgroup (:func:`dispatch`), so the
runtime and the interpreter size it alike; past ``fold`` workgroups it is *balanced*
(:func:`kvdsl.nodes.index.flat_index`). The drop-ins keep the template's dispatch and run the
same program in blocks (:func:`block_walk`, :func:`block_lanes`).

The *pair* walk (:func:`pair_walk`, :func:`uses_pairs`: by default the rotary kernels loading
f16 and the K RMSNorm kernels that reduce in workgroup memory; a config's ``pairs`` field asks
for it elsewhere) is a form of the flat walk for rotary or K RMSNorm: one invocation per pair of
vectors ``(dr, dr + HALF_V4)`` of a row, ``rows * HALF_V4`` items (:func:`pair_dispatch`). It
loads ``x0``, ``x1`` and cos/sin once and stores both rotated vectors and both V vectors
(:func:`move_rotated_pair`), where the vector walk's two partner invocations each loaded the
pair and kept one half through a ``select``. Same bytes
written, same arithmetic per element (bit-identical outputs); H200, ``benchmarks/probe9.py``,
``build_rotary_flat_f16_in_llama31_8b``: 88% → 95% of a vec4 copy at 2,048 tokens, 90% → 94% at
8,192 (a ``vec4<f16>`` is 8 bytes: the vector walk's invocations moved too little each). With K
RMSNorm the pair (rotary's, or the row's two halves) makes one partial of the row's sum of
squares, and both vectors' loads precede the barrier (``benchmarks/probe15.py``).

The vector helpers compute exactly what the scalar forms do, lane by lane, in the same order:
:func:`rotate` is :func:`kvdsl.nodes.rotary.rotate_loaded` on four lanes (or one), :func:`quantize` is
:func:`kvdsl.nodes.quant.quantize`, :func:`pack_int4` packs two words as
:func:`kvdsl.nodes.quant.pack_int4` does (low nibble first).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

from kvdsl.ir import (
    Buffer,
    Dispatch,
    Kernel,
    KernelBuilder,
    Scalar,
    Val,
    Vec,
    array,
    clamp,
    construct,
    convert,
    dot,
    f16,
    f32,
    i32,
    lit,
    min_,
    pack2x16float,
    round_,
    select,
    shuffle_xor,
    u32,
    unpack2x16float,
    vec,
)
from kvdsl.ir.nodes import Binary, Break, Expr, Lit, Name
from kvdsl.ir.ops import Op
from kvdsl.nodes.index import _wg, flat_index, workgroup_flat
from kvdsl.nodes.rotary import rotate_loaded
from kvdsl.nodes.quant import NIBBLE_OFFSET

WALK = "flat"
#: The flat walk's workgroup size when a config leaves it unset (64 reaches ~55% of a copy).
FLAT_WORKGROUP = 256
#: The flat walk's default when K RMSNorm reduces its rows in workgroup memory: each workgroup
#: waits at a barrier, and on an H200 halving the workgroups' size took the quantising kernels
#: from 83-91% to 94-100% of a copy under Dawn and wgpu-native alike, the others unchanged
#: (``benchmarks/probe21.py``).
KNORM_WORKGROUP = 128
#: Every other walk's default.
DEFAULT_WORKGROUP = 64
#: f16 data that is only moved travels as ``vec4<u32>`` words of eight halves: 16 bytes per
#: invocation, as an f32 ``vec4`` (one ``vec4<f16>`` is 8; measured on an H200, 89-94% → 99-102%
#: of a vec4 copy), and the module needs no ``enable f16;``.
WORD_HALVES = 8
WORDS = Vec(4, u32)
#: Four f16 lanes a flat walk computes on (rotary, K RMSNorm, conversions) travel as two u32
#: words: :func:`as_f32` unpacks them (``unpack2x16float``), :func:`to` packs results
#: (``pack2x16float``), both through helper functions the kernel declares once. The module needs
#: no ``enable f16;``, so it runs where ``shader-f16`` is missing (Dawn on an H200 has none), and
#: on an H200 it runs as fast as ``vec4<f16>`` (``benchmarks/probe22.py``).
HALVES = Vec(2, u32)
UNPACK_FN, PACK_FN = "unpackHalves", "packHalves"


#: The template's walks. Their kernels keep the template's dispatch, ``ceil(rows / WG)``
#: workgroups folded at ``fold`` (workgroup ``w`` owns rows ``[w*WG, (w+1)*WG)``), and run the
#: flat walk's program over each workgroup's rows in a loop (:func:`block_walk`) wherever
#: :func:`program` says it serves them.
TEMPLATE_WALKS = ("per_row", "cooperative", "hybrid")


def program(cfg: Any) -> bool:
    """Whether ``cfg``'s kernel is the flat walk's program: ``walk="flat"``, or a template walk
    the block walk serves (:func:`block_walk`)."""
    return cfg.walk == WALK or block_walk(cfg)


def block_walk(cfg: Any) -> bool:
    """Whether a template walk's kernel runs the flat program in blocks.

    The template walks one row per invocation (``per_row``: adjacent invocations a row apart,
    1-10% of a copy's bandwidth on an H200) or one element per lane (``cooperative``: scalar
    loads, division by runtime extents per element, 24-83%). The block walk keeps the template's
    bindings, params and dispatch: workgroup ``w`` owns the same ``WG`` rows and its
    :func:`block_lanes` invocations step through their ``WG * per_row`` items, each step the
    flat program on adjacent vectors. It serves every template config but two, which keep the
    template's walk: K RMSNorm (reduced in workgroup memory, so each step must hold whole rows)
    when neither up to 256 lanes nor ``WG`` is a multiple of a row's items that divides the
    block, and int4 rows the flat walk cannot pack four elements at a time.
    """
    if cfg.walk not in TEMPLATE_WALKS:
        return False
    rotary = getattr(cfg, "rotary", False)
    width = lanes(cfg.head_dim, rotary)
    if getattr(cfg, "bits", 8) == 4 and width == 1:
        return False
    if getattr(cfg, "k_norm", False):
        items = cfg.head_dim // width // (2 if _pairs(cfg) else 1)
        return block_lanes(cfg.workgroup_size, items, whole_rows=True) % items == 0
    return True


def resolve_workgroup(cfg: Any) -> None:
    """Give a frozen config left at ``workgroup_size=None`` its walk's default size."""
    if cfg.workgroup_size is None:
        size = FLAT_WORKGROUP if cfg.walk == WALK else DEFAULT_WORKGROUP
        barrier = getattr(cfg, "k_norm", False) and getattr(cfg, "reduction", "") == "workgroup"
        if cfg.walk == WALK and barrier:
            size = KNORM_WORKGROUP
        object.__setattr__(cfg, "workgroup_size", size)


def lanes(row_len: int, rotary: bool = False) -> int:
    """The vector width of a flat walk over rows of ``row_len`` elements: 4 or 1.

    With rotary the half row must divide by 4 too, so a vector never straddles the halves.
    """
    return 4 if row_len % (8 if rotary else 4) == 0 else 1


def width(row_len: int, types: tuple[str, ...], rotary: bool = False) -> int:
    """The vector width of a flat walk over rows of ``row_len`` values of ``types``: 8 halves as
    :data:`WORDS` when the walk only moves f16 data (every type f16, no rotary) and the row
    divides by 8, else :func:`lanes`."""
    if not rotary and row_len % WORD_HALVES == 0 and all(t == "f16" for t in types):
        return WORD_HALVES
    return lanes(row_len, rotary)


def elem(ty: Scalar, width: int) -> Scalar | Vec:
    """``ty``, ``vec{width}<ty>``, :data:`WORDS` for eight halves (``width`` 8, ``ty`` f16) or
    :data:`HALVES` for four (``width`` 4, ``ty`` f16)."""
    if width == WORD_HALVES:
        if ty != f16:
            raise ValueError(f"only f16 data moves as {WORDS} words, not {ty}")
        return WORDS
    if width == 4 and ty == f16:
        return HALVES
    return ty if width == 1 else vec(width, ty)


def binding(kb: KernelBuilder, name: str, ty: Scalar, width: int, access: str = "read") -> Buffer:
    """A binding of ``ty`` data as :func:`elem` of ``width``; f16 carried in u32 words keeps f16
    as the host array's type (:attr:`kvdsl.ir.nodes.Binding.data`)."""
    e = elem(ty, width)
    return kb.binding(name, e, access, ty if ty == f16 and e in (WORDS, HALVES) else None)


def zero(ty: Scalar | Vec) -> Val:
    """Zero in every lane of ``ty`` (all-zero words are +0.0 halves)."""
    return splat(ty, 0 if ty.scalar.is_int else 0.0)


def splat(ty: Scalar | Vec, x: Val | float | int) -> Val:
    """``x`` in every lane of ``ty`` (the builder does not splat scalars into vectors)."""
    if isinstance(ty, Vec):
        return construct(ty, *([x] * ty.n))
    return convert(ty, x)


def vector_const(kb: KernelBuilder, scalar_const: Val, row_len: int, width: int) -> Val:
    """``const NAME_V4 = row_len / 4`` beside the declared ``scalar_const`` ``NAME = row_len``;
    ``scalar_const`` itself when ``width`` is 1."""
    if width == 1:
        return scalar_const
    return kb.const(f"{scalar_const.node.name}_V{width}", u32, row_len // width)


def named(kb: KernelBuilder, name: str, width: int) -> Val:
    """The const ``{name}_V4`` (or ``{name}`` when ``width`` is 1) that :func:`vector_const`
    declared, e.g. to size the dispatch outside the function that declared it."""
    return Val(Name(name if width == 1 else f"{name}_V{width}"), u32)


@dataclass(frozen=True)
class Item:
    """One invocation's vector: flat index ``e``, its row and its index ``d`` inside the row;
    ``end``, the walk's ``rows * per_row`` where it named one (the block walk's ``itemEnd``), so
    that a program bounding its items again reuses it."""

    e: Val
    row: Val
    d: Val
    end: Val | None = None


def walk(
    kb: KernelBuilder, cfg: Any, rows: Val, per_row: Val, width: int, guard: bool = True
) -> Item:
    """The vector this invocation owns among ``rows * per_row`` (vectors of ``width`` lanes).

    With ``guard`` an invocation past the end leaves at once (:meth:`KernelBuilder.leave_if`).
    Without it (a kernel with a barrier cannot return early) the row is clamped to the last one,
    so every invocation's loads stay in range: an invocation past the end holds a copy of a
    vector of the last row, in a workgroup row of its own (rows are whole within a workgroup),
    and the caller leaves it after the barrier, before any store. A template walk
    (:data:`TEMPLATE_WALKS`) walks the same items in blocks (:func:`block_walk`).
    """
    if cfg.walk != WALK:
        return _block_item(kb, cfg.fold, rows, per_row, f"d{width}" if width > 1 else "d", guard)
    kb.comment("Flat walk: one invocation per destination vector, adjacent invocations on")
    kb.comment("adjacent vectors; no loop, so every invocation makes one memory round trip.")
    return _item(kb, cfg.fold, rows, per_row, f"d{width}" if width > 1 else "d", guard)


def _item(kb: KernelBuilder, fold: int, rows: Val, per_row: Val, d: str, guard: bool) -> Item:
    """Item ``e`` of ``rows * per_row`` (the balanced flat index), its vector ``e % per_row``
    named ``d``, its row; guarded (past the end returns) or clamped to the last row."""
    e = flat_index(kb, fold, "e", bound=rows * per_row if guard else None, balanced=True)
    return _row_of(kb, e, rows, per_row, d, guard)


def _row_of(
    kb: KernelBuilder, e: Val, rows: Val, per_row: Val, d: str, guard: bool, end: Val | None = None
) -> Item:
    dv = kb.let(d, e % per_row)
    if guard:
        return Item(e, kb.let("row", e / per_row), dv, end)
    kb.comment("Past the end: the last row again (loads in range; it leaves before any store).")
    return Item(e, kb.let("row", min_(e / per_row, rows - 1)), dv, end)


def _block_item(kb: KernelBuilder, fold: int, rows: Val, per_row: Val, d: str, guard: bool) -> Item:
    """The block walk (:func:`block_walk`): item ``e`` at each step of the loop this opens over
    the rest of the kernel; past the end the rest of the step is skipped (``guard``) or the row
    clamped. From here on the kernel runs :func:`block_lanes` invocations per workgroup."""
    wg = _wg(kb)
    rows_per_group = kb.workgroup_size[0]
    lanes = block_lanes(rows_per_group, _known(kb, per_row), whole_rows=not guard)
    kb.comment("Block walk: the template's dispatch (workgroup w owns rows [w*WG, (w+1)*WG));")
    if lanes == rows_per_group:
        kb.comment("its invocations walk those rows' items WG at a time, adjacent lanes on")
        step, steps = wg, per_row
    else:
        kb.comment(
            "its LANES invocations walk those rows' items LANES at a time, adjacent lanes on"
        )
        kb.workgroup_size, kb.workgroup_size_name = (lanes, 1, 1), None
        step = kb.workgroup_const("LANES")
        steps = wg * per_row / step
    kb.comment("adjacent vectors, running the flat walk's program on each.")
    base = kb.let("itemBase", workgroup_flat(kb, fold) * (wg * per_row))
    end = kb.let("itemEnd", rows * per_row)
    if not guard:
        # A barrier in the loop forbids the break below: the loop stops at the last step that
        # holds an item instead (a decode append's rows fill a block's first steps only).
        kb.comment("The steps that hold an item (alike for every lane; none past the end).")
        items = kb.let("blockItems", min_(wg * per_row, end - min_(base, end)))
        steps = (items + (step - 1)) / step

    def step_end() -> None:
        if any(w.name not in kb.fenced for w in kb.workgroup_vars):
            kb.comment("The next step reuses workgroup memory: wait until every lane read it.")
            kb.barrier()

    s = kb.open(kb.for_range("s", lit(0, u32), steps), before_close=step_end)
    if guard:
        kb.comment("The rest of the block lies past the end (alike for every lane): done.")
        with kb.if_(base + s * step >= end):
            kb.emit(Break())
    e = kb.let("e", base + kb.lid.x + s * step)
    if guard:
        kb.leave_if(e >= end)
    return _row_of(kb, e, rows, per_row, d, guard, end)


#: Invocations per workgroup of the block walk, at most (:func:`block_lanes`): the flat walk's
#: default, and WebGPU's default limit.
BLOCK_LANES = 256


def block_lanes(wg: int, per_row: int | None, whole_rows: bool = False) -> int:
    """The block walk's invocations per workgroup for the template's ``wg`` rows per workgroup
    of ``per_row`` items: the largest divisor of the block's ``wg * per_row`` items up to
    :data:`BLOCK_LANES` (with ``whole_rows``, the largest that is also a multiple of
    ``per_row``, so that each step holds whole rows), when that is more than ``wg``; else
    ``wg``, the template's own lanes.

    The host dispatches ``ceil(rows / wg)`` workgroups; how many invocations each runs is the
    module's own ``@workgroup_size``. With ``wg = 64`` a 2,048-token prefill of batch 4 is 1,024
    workgroups, two warps each: a sixth of an H200's warp slots, too few loads in flight.
    """
    if per_row is None:
        return wg
    items, step = wg * per_row, per_row if whole_rows else 1
    for lanes in range(BLOCK_LANES - BLOCK_LANES % step, wg, -step):
        if items % lanes == 0:
            return lanes
    return wg


def _known(kb: KernelBuilder, v: Val) -> int | None:
    """The value of ``v`` when it is a literal or a module const's name."""
    n = v.node
    if isinstance(n, Name):
        n = next((c.value for c in kb.consts if c.name == n.name), None)
    return n.value if isinstance(n, Lit) else None


def pairs_apply(cfg: Any) -> bool:
    """Whether the pair walk can serve ``cfg``: flat or a template walk, rotary or K RMSNorm
    (the pair is then the row's vectors ``d`` and ``d + HALF_V4``), half a row a whole number of
    ``vec4``."""
    return (
        (cfg.walk == WALK or cfg.walk in TEMPLATE_WALKS)
        and (cfg.rotary or getattr(cfg, "k_norm", False))
        and cfg.head_dim % (2 * 4) == 0
    )


def uses_pairs(cfg: Any) -> bool:
    """Whether ``cfg``'s flat rotary K walks one invocation per rotary pair (:func:`pair_walk`).

    ``cfg.pairs`` where set (the configs check it with
    :func:`kvdsl.kernels.config.pairs_field`); unset, every rotary kernel loading f16
    (``input_type``) does, in the flat walk and in the drop-ins' blocks. H200
    (``benchmarks/probe9.py``, ``probe10.py``): the f16 build gains 86-91% → 95-97% of a copy.
    Loads of f32 already move 16 bytes per vector (the f32 → f16 build: 98% → 96% with pairs at
    8,192 tokens), so f32 kernels keep one invocation per vector. The flat f16 rotary appends
    reach 93-94% of a copy at 2,048 tokens on pairs against 84-89% per vector (runs 15, 21, 29,
    32), and a 1-token append takes 0.1-0.2 µs more on pairs (5.54 against 5.46 µs, 5.63
    against 5.44 µs in run 21: within the ±0.5 µs this GPU moves between calls, and 1.33-1.35x
    the empty dispatch); ``pairs=False`` still asks for the vector walk. In the drop-ins'
    blocks the lanes are the same either way, so pairs halve a lane's steps and gain at one
    token too (``benchmarks/probe25.py``, batch 4: 10-16% faster at one token, 61-81% → 76-85%
    of a copy at 2,048 tokens; the f32 ones gain at one token and lose 2-5 points at 2,048).

    Unset, the flat K RMSNorm kernels that reduce in workgroup memory walk pairs too: twice the
    bytes in flight per invocation before the barrier, half the partials per row. H200 at batch
    4 (``benchmarks/probe15.py``): int4 ``build_quant`` 79-80% → 91-94% of a copy. Their
    subgroup form (``reduction="subgroup"``, 91-100% already) keeps one invocation per vector
    unless asked; so do the subgroup drop-ins but the int4 ones. H200 at batch 4, 2,048 tokens
    (``benchmarks/probe34.py``): on vectors against pairs, int8 92% against 82% of a copy, the
    plain and rotary builds 89-91% against 88-89%; the int4 build 89% against 91% and the int4
    append 73% against 84%.
    """
    return program(cfg) and _pairs(cfg)


def _pairs(cfg: Any) -> bool:
    """:func:`uses_pairs` of a config whose kernel is the flat program."""
    pairs = getattr(cfg, "pairs", None)
    if pairs is not None:
        return pairs
    if not pairs_apply(cfg):
        return False
    if getattr(cfg, "k_norm", False):
        int4_block = cfg.walk != WALK and getattr(cfg, "bits", None) == 4
        return cfg.reduction == "workgroup" or int4_block
    return getattr(cfg, "input_type", None) == f16.name


def pair_walk(kb: KernelBuilder, cfg: Any, rows: Val, half: Val, guard: bool = True) -> Item:
    """The pair this invocation owns among ``rows * half`` (``half`` = ``HALF_V4``).

    ``Item.d`` is ``dr = e % HALF_V4``: the pair's first vector; its second is ``dr + HALF_V4``.
    With ``guard`` invocations past the end return at once; without it (K RMSNorm's barrier is
    ahead) their row is clamped to the last, as :func:`walk` does.
    """
    kb.comment("Pair walk: one invocation per pair of vectors (dr, dr + HALF_V4) of a row;")
    kb.comment("it loads both (and cos/sin once) and stores both.")
    if cfg.walk != WALK:
        return _block_item(kb, cfg.fold, rows, half, "dr", guard)
    return _item(kb, cfg.fold, rows, half, "dr", guard)


def move_rotated_pair(
    kb: KernelBuilder,
    k: Buffer,
    v: Buffer,
    src_base: Val,
    dr: Val,
    rot: tuple[Buffer, Buffer, Val, Val],
    k_out: Buffer,
    v_out: Buffer,
    dst: Val | Callable[[], Val],
) -> None:
    """The pair walk's row program: vectors ``dr`` and ``dr + half`` of K, NeoX-rotated, and of
    V, from the rows at ``src_base`` to ``k_out``/``v_out`` at ``dst`` and ``dst + half``.

    ``rot`` is ``(cos, sin, pos, half)``, ``half`` counting vectors (``dr < half``). K's lanes
    are the products of :func:`rotate`, element for element (``x0 * cs - x1 * sn`` and
    ``x1 * cs + x0 * sn``, no ``select``), converted to each output's element type. Every load
    comes before any store; ``dst`` may be a callable, declared after the loads.
    """
    cos, sin, pos, half = rot
    cs = kb.let("cs", cos[pos * half + dr])
    sn = kb.let("sn", sin[pos * half + dr])
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
    rot: tuple[Buffer, Buffer, Val, Val] | None,
    k_out: Buffer,
    v_out: Buffer,
    dst: Val,
    pairs: bool,
) -> None:
    """An appending walk's program for one new row: vector ``d`` of K and V from the rows at
    ``src_base`` to ``k_out``/``v_out`` at ``dst``, K NeoX-rotated where ``rot`` (``(cos, sin,
    pos, half)``, as :func:`move_rotated_pair` takes it) is given, converted to each output's
    element type; on the pair walk (``pairs``) the pair ``d``, ``d + half``
    (:func:`move_rotated_pair`)."""
    if pairs:
        move_rotated_pair(kb, k, v, src_base, d, rot, k_out, v_out, dst)
        return
    key = k[src_base + d] if rot is None else rotate(kb, k, src_base, d, *rot)
    k_out[dst] = to(kb, k_out.binding.elem, key)
    v_out[dst] = to(kb, v_out.binding.elem, v[src_base + d])


def rotated_pair(x0: Val, x1: Val, cs: Val, sn: Val) -> tuple[Val, Val]:
    """The NeoX rotation of the pair ``(x0, x1)``: ``(x0*cs - x1*sn, x1*cs + x0*sn)``, element
    for element the products of :func:`rotate` (which keeps one of them through a ``select``)."""
    return x0 * cs - x1 * sn, x1 * cs + x0 * sn


def pair_dispatch(kb: KernelBuilder, rows: Val, cfg: Any) -> Dispatch:
    """``rows * HALF_V4`` items for :func:`pair_walk` (``HALF_V4`` declared by the kernel)."""
    return dispatch(rows, named(kb, "HALF", 4), cfg)


def dispatch(rows: Val, per_row: Val, cfg: Any) -> Dispatch:
    """``rows * per_row`` items, ``cfg.workgroup_size`` per workgroup, folded at ``cfg.fold``
    with the workgroups spread evenly over the y rows (``balanced``: the walks read x back); for
    a template walk its own rule, ``rows`` invocations folded as the template folds them."""
    if cfg.walk != WALK:
        return Dispatch(rows.node, cfg.workgroup_size, cfg.fold)
    return Dispatch((rows * per_row).node, cfg.workgroup_size, cfg.fold, balanced=True)


def vector_extents(kernel: Kernel) -> Kernel:
    """``kernel`` with each vector binding's extent counted in vectors instead of scalars.

    The modes state extents in elements; a flat kernel's vector bindings hold ``n`` of them per
    vector (eight for f16 words), and every flat extent divides exactly (the row lengths divide
    by the width).
    """
    widths = {b.name: b.host_values for b in kernel.bindings if b.host_values > 1}
    if not widths:
        return kernel  # nothing to count in vectors: the kernel as it is, without a copy
    extents = tuple(
        (name, _exact_div(e, widths[name]) if name in widths else e) for name, e in kernel.extents
    )
    return dataclasses.replace(kernel, extents=extents)


def _exact_div(e: Expr, n: int) -> Expr:
    return Binary(Op.DIV, e, Lit(n, u32))


def as_f32(kb: KernelBuilder, x: Val) -> Val:
    """``x`` converted to f32 lanes (``vec4<f32>`` for a vector; :data:`HALVES` unpacked)."""
    if x.ty == HALVES:
        return kb.fn_call(_halves_fn(kb, UNPACK_FN), x)
    return convert(vec(x.ty.n, f32) if isinstance(x.ty, Vec) else f32, x)


def to(kb: KernelBuilder, ty: Scalar | Vec, x: Val) -> Val:
    """``x`` as a value of the element type ``ty`` to store: itself, converted, or f32 lanes
    packed into :data:`HALVES`."""
    if x.ty == ty:
        return x
    if ty == HALVES:
        return kb.fn_call(_halves_fn(kb, PACK_FN), as_f32(kb, x))
    return convert(ty, as_f32(kb, x) if x.ty == HALVES else x)


def _halves_fn(kb: KernelBuilder, name: str) -> str:
    """Declare ``unpackHalves(w: vec2<u32>) -> vec4<f32>`` or ``packHalves(x: vec4<f32>) ->
    vec2<u32>`` in ``kb`` unless it already is; its name."""
    if any(f.name == name for f in kb.functions):
        return name
    f32x4 = vec(4, f32)
    if name == UNPACK_FN:
        with kb.function(name, [("w", HALVES)], f32x4) as (w,):
            kb.return_(construct(f32x4, unpack2x16float(w.x), unpack2x16float(w.y)))
    else:
        with kb.function(name, [("x", f32x4)], HALVES) as (x,):
            kb.return_(
                construct(HALVES, pack2x16float(x.member("xy")), pack2x16float(x.member("zw")))
            )
    return name


def rotate(
    kb: KernelBuilder,
    src: Buffer,
    row_base: Val,
    d: Val,
    cos: Buffer,
    sin: Buffer,
    pos: Val,
    half: Val,
) -> Val:
    """Vector ``d`` of the NeoX-rotated row at ``src[row_base]``, in f32 lanes.

    ``half`` counts vectors (``HALF_V4``); the vector lies in one half of the row, its partner at
    ``d ± half`` and its cos/sin at ``pos * half + d % half``. Lane for lane what
    :func:`kvdsl.nodes.rotary.rotate_loaded` computes on scalars.
    """
    return rotate_loaded(kb, lambda i: as_f32(kb, src[row_base + i]), d, cos, sin, pos, half)


def square(x: Val | tuple[Val, ...]) -> Val:
    """``dot(x, x)`` (``x * x`` for a scalar); of a tuple, the sum of its members' in order."""
    xs = x if isinstance(x, tuple) else (x,)
    parts = [dot(v, v) if isinstance(v.ty, Vec) else v * v for v in xs]
    total = parts[0]
    for p in parts[1:]:
        total = total + p
    return total


def row_sum_of_squares(
    kb: KernelBuilder,
    x: Val | tuple[Val, ...],
    d: Val,
    per_row: Val,
    wg: int,
    lanes_per_row: int,
) -> Val:
    """The sum of squares of the row whose vector ``d`` this invocation holds as ``x``.

    ``x`` may be the pair walk's two vectors (:func:`square`); ``per_row`` and
    ``lanes_per_row`` then count pairs, the row's invocations.

    Each invocation writes ``dot(x, x)`` to workgroup memory; after a barrier it adds its row's
    ``per_row`` partials from the row's first lane, in a fixed order. A row's vectors are
    consecutive invocations of one workgroup when ``WG % per_row == 0`` (the configs require it),
    so the row starts at lane ``lid.x - d``.

    When the row has a multiple of four partials, they are stored four to a ``vec4<f32>``
    (``wsum[lid.x / 4][lid.x % 4]``) and read back as ``per_row / 4`` vector loads into one
    vector accumulator, summed ``(a.x + a.y) + (a.z + a.w)``: partial ``j`` goes to lane
    ``j % 4``. That is four independent chains of ``per_row / 4`` adds (against ``per_row``
    with one: H200, 77% → 97% of a vec4 copy's bandwidth) and a quarter of the workgroup loads
    of scalar partials (``benchmarks/probe14.py``, batch 4: int4 K RMSNorm 72-73% → 79-80% of
    the copy, int8 85-86% → 90-93%, with rotary 83-84% → 91%; bit-identical to four scalar
    accumulators). Otherwise the partials are scalars added in one chain.

    Call at the top level of the entry point, with every invocation: the barrier must be
    uniform. Invocations past the end (the unguarded :func:`walk`) fill whole workgroup rows of
    their own, whose sums only they read.
    """
    sq = square(x)
    first = kb.lid.x - d
    if lanes_per_row % 4 or wg % 4:
        wsum = kb.workgroup_var("wsum", array(f32, wg))
        wsum[kb.lid.x] = sq
        kb.barrier()
        row = kb.let("rowLane", first)
        ms = kb.var("ms", f32, 0.0)
        with kb.for_range("j", lit(0, u32), per_row, 1) as j:
            ms.set(ms + wsum[row + j])
        return ms
    wsum = kb.workgroup_var("wsum", array(vec(4, f32), wg // 4))
    wsum[kb.lid.x / 4, kb.lid.x % 4] = sq
    kb.barrier()
    row = kb.let("rowQuad", first / 4)
    acc = kb.var("acc", vec(4, f32), splat(vec(4, f32), 0.0))
    with kb.for_range("j", lit(0, u32), per_row / 4, 1) as j:
        acc.set(acc + wsum[row + j])
    return kb.let("ms", (acc.x + acc.y) + (acc.z + acc.w))


def subgroup_row_sum_of_squares(
    kb: KernelBuilder,
    x: Val | tuple[Val, ...],
    d: Val,
    per_row: Val,
    wg: int,
    fence: bool = False,
) -> Val:
    """:func:`row_sum_of_squares` across the subgroup: no barrier where a subgroup holds a row.

    A butterfly of ``subgroupShuffleXor`` over ``min(subgroup_size, per_row)`` lanes (masks 1, 2,
    4, ...) leaves every lane of an aligned run of that many invocations with the run's sum;
    where the subgroup is narrower than the row (a uniform branch: llvmpipe's are 8 wide,
    NVIDIA's 32), each lane writes that sum to ``wsum[lid.x]`` and, after a barrier, adds the
    row's runs from its first lane. Rows are aligned runs of ``per_row`` (a power of two)
    consecutive invocations and subgroups aligned runs of consecutive local indices (WGSL leaves
    that layout to the device; every device kvdsl runs on uses it, see :mod:`kvdsl.interp`).
    H200, batch 4 (``benchmarks/probe8.py``): int4 K RMSNorm 72% → 95-99% of a copy, int8 85% →
    94-95%, rotary 84-86% → 93-97%. The sum's order differs from :func:`row_sum_of_squares`'s
    (a butterfly, not four accumulators): results may differ in the last ulps.

    ``fence`` (the drop-ins' block walk, which runs this once per step): the narrow branch ends
    with a second barrier, after every lane has read ``wsum``, so the next step may write it;
    the walk then adds no barrier of its own to each step, and a subgroup that holds the row
    passes none at all.
    """
    sg = kb.subgroup_size
    ms = kb.var("ms", f32, square(x))
    with kb.for_range("mask", lit(1, u32), min_(sg, per_row), 1, shift=True) as mask:
        ms.set(ms + shuffle_xor(ms, mask))
    with kb.if_(sg < per_row):
        wsum = kb.workgroup_var("wsum", array(f32, wg), fenced=fence)
        wsum[kb.lid.x] = ms
        kb.barrier()
        total = kb.var("total", f32, 0.0)
        with kb.for_range("j", lit(0, u32), per_row, sg) as j:
            total.set(total + wsum[kb.lid.x - d + j])
        ms.set(total)
        if fence:
            kb.comment("Every lane has read wsum: the next step may write it.")
            kb.barrier()
    return ms


@dataclass(frozen=True)
class ScaleIndex:
    """Where vector ``d``'s scales start in a scale binding and the step between its lanes'."""

    base: Val
    step: Val | None  # None for one lane per vector


def scale_index(
    kb: KernelBuilder,
    name: str,
    hk: Val,
    d: Val,
    head_dim: Val,
    width: int,
    per_channel: Val,
    step: Val | None = None,
) -> ScaleIndex:
    """The scales' index of vector ``d`` of kv head ``hk``, shared by K's and V's scale
    bindings: per channel ``hk*HEAD_DIM + 4d + l`` for lane ``l``, per tensor 0 in every lane,
    as ``per_channel`` (a bool over params) says (``{name}Base`` and ``sStep``). ``step`` reuses
    another index's step."""
    if width == 1:
        return ScaleIndex(kb.let(f"{name}Base", select(0, hk * head_dim + d, per_channel)), None)
    base = kb.let(f"{name}Base", select(0, hk * head_dim + d * width, per_channel))
    if step is None:
        step = kb.let("sStep", select(lit(0, u32), lit(1, u32), per_channel))
    return ScaleIndex(base, step)


def scales(kb: KernelBuilder, name: str, scale: Buffer, at: ScaleIndex) -> Val:
    """The scales of binding ``scale`` at ``at`` (:func:`scale_index`): ``f32``, or one
    ``vec4<f32>`` of the four lanes'."""
    if at.step is None:
        return kb.let(name, scale[at.base])
    width = 4
    lanes_ = [scale[at.base + at.step * i] if i else scale[at.base] for i in range(width)]
    return kb.let(name, construct(vec(width, f32), *lanes_))


def quantize(x: Val, scale: Val, qmin: Val, qmax: Val) -> Val:
    """``i32(clamp(round(x / scale), qmin, qmax))`` lane by lane (``qmin``/``qmax`` f32 consts)."""
    ty = x.ty
    out = elem(i32, ty.n) if isinstance(ty, Vec) else i32
    return convert(out, clamp(round_(x / scale), splat(ty, qmin), splat(ty, qmax)))


def pack_int4(kb: KernelBuilder, name: str, q: Val) -> Val:
    """Four int4 values as two u32 words (``vec2<u32>``), lanes 0/2 in the low nibbles."""
    nib = kb.let(
        name,
        convert(vec(4, u32), q + splat(vec(4, i32), NIBBLE_OFFSET)) & splat(vec(4, u32), 0xF),
    )
    return construct(vec(2, u32), nib.x | (nib.y << 4), nib.z | (nib.w << 4))
