"""The walks: which invocation touches which element of the rows a kernel writes.

- *per row* (:func:`per_row`, :func:`row_elements`): invocation ``i`` of the folded dispatch
  (``ceil(rows / WG)`` workgroups folded at ``fold``) owns row ``i`` and streams its elements in
  a loop: the template's walk, kept where the block walk cannot serve a template config.
- *flat vectors* (:func:`vectors`): ``rows * per_row`` invocations, invocation ``e`` owning
  vector ``d = e % per_row`` of row ``e / per_row``. Adjacent invocations touch adjacent vectors,
  a workgroup covers ``WG / per_row`` whole rows when ``WG`` divides by ``per_row``, and every
  invocation makes one memory round trip. The dispatch (:func:`dispatch`) is ``rows * per_row``
  items, ``WG`` per workgroup, *balanced* past ``fold`` workgroups
  (:func:`kvdsl.nodes.index.flat_index`).
- *pairs* (:func:`pairs`): one invocation per pair of vectors ``(dr, dr + HALF_V4)`` of a row,
  ``rows * HALF_V4`` items, for rotary and K RMSNorm: the pair's loads
  (and its cos/sin entry) are made once.
- *blocks* (``blocks=True``): the template's dispatch, ``ceil(rows / WG)`` workgroups folded at
  ``fold`` (workgroup ``w`` owns rows ``[w*WG, (w+1)*WG)``), whose :func:`block_lanes`
  invocations step through the block's items running the flat walk's program on adjacent
  vectors: the drop-ins keep the template's interface and walk like the flat kernels.

The vector width (:func:`lanes`) is 4 when the row length divides by 4 (and, for rotary, the
rotated pairs of a row too, so that a vector lies inside one half of the rotated part or past it
and its cos/sin entries are one ``vec4``), else 1;
a flat kernel's host-side extents then count vectors (:func:`vector_extents`).
"""

from __future__ import annotations

import dataclasses
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

from kvdsl.ir import Dispatch, Kernel, KernelBuilder, Val, lit, min_
from kvdsl.ir.builder import as_val
from kvdsl.ir.tree import Binary, Break, Expr, Lit, Name
from kvdsl.ir.ops import Op
from kvdsl.ir.types import u32
from kvdsl.nodes.index import flat_index, workgroup_flat, workgroup_size_value


def per_row(kb: KernelBuilder, fold: int, rows: Val, name: str = "i") -> Val:
    """The row this invocation owns; invocations past ``rows`` return."""
    kb.comment("Thread i streams one contiguous row.")
    return flat_index(kb, fold, name, bound=rows)


@contextmanager
def row_elements(kb: KernelBuilder, row_len: Val | int, name: str = "d") -> Iterator[Val]:
    """``for (var d = 0u; d < row_len; d = d + 1u)``: the elements of one row, in order."""
    with kb.for_range(name, as_val(0, u32), row_len) as d:
        yield d


def lanes(row_len: int, rotary: bool = False, half: int | None = None) -> int:
    """The vector width of a flat walk over rows of ``row_len`` elements: 4 or 1.

    With rotary the rotated pairs of a row (``half``; unset, half the row) must divide by 4
    too, so a vector never straddles the halves or the end of the rotated part.
    """
    if rotary and (row_len // 2 if half is None else half) % 4:
        return 1
    return 4 if row_len % 4 == 0 else 1


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


def vectors(
    kb: KernelBuilder,
    fold: int,
    rows: Val,
    per_row: Val,
    width: int,
    guard: bool = True,
    blocks: bool = False,
) -> Item:
    """The vector this invocation owns among ``rows * per_row`` (vectors of ``width`` lanes).

    With ``guard`` an invocation past the end leaves at once (:meth:`KernelBuilder.leave_if`).
    Without it (a kernel with a barrier cannot return early) the row is clamped to the last one,
    so every invocation's loads stay in range: an invocation past the end holds a copy of a
    vector of the last row, in a workgroup row of its own (rows are whole within a workgroup),
    and the caller leaves it after the barrier, before any store. With ``blocks`` the same items
    are walked in the template's blocks.
    """
    d = f"d{width}" if width > 1 else "d"
    if blocks:
        return _block_item(kb, fold, rows, per_row, d, guard)
    kb.comment("Flat walk: one invocation per destination vector, adjacent invocations on")
    kb.comment("adjacent vectors; no loop, so every invocation makes one memory round trip.")
    return _item(kb, fold, rows, per_row, d, guard)


def pairs(
    kb: KernelBuilder, fold: int, rows: Val, half: Val, guard: bool = True, blocks: bool = False
) -> Item:
    """The pair this invocation owns among ``rows * half`` (``half`` = ``HALF_V4``).

    ``Item.d`` is ``dr = e % HALF_V4``: the pair's first vector; its second is ``dr + HALF_V4``.
    ``guard`` and ``blocks`` as for :func:`vectors`.
    """
    kb.comment("Pair walk: one invocation per pair of vectors (dr, dr + HALF_V4) of a row;")
    kb.comment("it loads both (and cos/sin once) and stores both.")
    if blocks:
        return _block_item(kb, fold, rows, half, "dr", guard)
    return _item(kb, fold, rows, half, "dr", guard)


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
    """The block walk: item ``e`` at each step of the loop this opens over
    the rest of the kernel; past the end the rest of the step is skipped (``guard``) or the row
    clamped. From here on the kernel runs :func:`block_lanes` invocations per workgroup."""
    wg = workgroup_size_value(kb)
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
    module's own ``@workgroup_size``: more lanes than the template's keep more loads in flight.
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


def dispatch(rows: Val, per_row: Val, workgroup_size: int, fold: int, blocks: bool) -> Dispatch:
    """``rows * per_row`` items, ``workgroup_size`` per workgroup, folded at ``fold`` with the
    workgroups spread evenly over the y rows (``balanced``: the walks read x back); in
    ``blocks``, the template's rule: ``rows`` invocations folded as the template folds them."""
    if blocks:
        return Dispatch(rows.node, workgroup_size, fold)
    return Dispatch((rows * per_row).node, workgroup_size, fold, balanced=True)


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
