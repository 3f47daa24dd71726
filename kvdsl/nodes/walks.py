"""Walks: which invocation touches which element of a span of contiguous rows.

- **per-row**: invocation ``i`` of the folded dispatch owns row ``i`` and streams its
  ``row_len`` elements in a loop (few invocations, each touching a contiguous run);
- **cooperative**: workgroup ``w`` owns rows ``[w*WG, (w+1)*WG)``; at step ``s`` lane ``l`` touches
  element ``s*WG + l`` of that span, so adjacent lanes hit adjacent addresses on both sides.

Both dispatch ``ceil(rows / WG)`` workgroups folded at ``fold``.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

from kvdsl.ir import KernelBuilder, Val, min_
from kvdsl.ir.builder import as_val
from kvdsl.ir.types import u32
from kvdsl.nodes.index import _wg, flat_index, workgroup_flat


def per_row(kb: KernelBuilder, fold: int, rows: Val, name: str = "i") -> Val:
    """The row this invocation owns; invocations past ``rows`` return."""
    kb.comment("Thread i streams one contiguous row.")
    return flat_index(kb, fold, name, bound=rows)


@contextmanager
def row_elements(kb: KernelBuilder, row_len: Val | int, name: str = "d") -> Iterator[Val]:
    """``for (var d = 0u; d < row_len; d = d + 1u)``: the elements of one row, in order."""
    with kb.for_range(name, as_val(0, u32), row_len) as d:
        yield d


def cooperative_span(kb: KernelBuilder, fold: int, rows: Val, row_len: Val) -> tuple[Val, Val]:
    """``(elemBase, totalElems)``: the first element of this workgroup's span and the bound."""
    kb.comment("Each workgroup copies the contiguous element span of its WG rows")
    kb.comment("cooperatively: at step s lane l touches element s*WG + l, so adjacent")
    kb.comment("lanes hit adjacent addresses on both source and destination.")
    wg_flat = workgroup_flat(kb, fold)
    elem_base = kb.let("elemBase", wg_flat * (_wg(kb) * row_len))
    total = kb.let("totalElems", rows * row_len)
    return elem_base, total


def _full_tile(kb: KernelBuilder, elem_base: Val, total: Val, span: Val) -> Val:
    """``elemBase + span <= total`` written so no u32 can wrap (``&&`` short-circuits)."""
    return kb.let("fullTile", (total >= span).land(elem_base <= total - span))


def _tile_steps(kb: KernelBuilder, elem_base: Val, row_len: Val) -> Iterator[Val]:
    """``e = elemBase + s*WG + lid.x`` for ``s`` in ``[0, row_len)``: a full tile, no test."""
    with kb.for_range("s", as_val(0, u32), row_len) as s:
        yield kb.let("e", elem_base + s * _wg(kb) + kb.lid.x)


def cooperative(kb: KernelBuilder, fold: int, rows: Val, row_len: Val) -> Iterator[Val]:
    """The element ``e`` this lane touches at each step; iterate it: ``for e in cooperative(...)``.

    The body is generated twice. A workgroup whose whole span lies inside the rows (every
    workgroup but the last) runs a loop with a constant trip count and no bounds test, which the
    GPU compiler unrolls and pipelines (measured on an H200: 87% of a vec4 copy's bandwidth,
    against 31% with the test inside the loop); the last workgroup runs the guarded loop.
    """
    elem_base, total = cooperative_span(kb, fold, rows, row_len)
    span = kb.let("span", _wg(kb) * row_len)
    with kb.if_(_full_tile(kb, elem_base, total, span)):
        yield from _tile_steps(kb, elem_base, row_len)
    with kb.else_():
        for e in _tile_steps(kb, elem_base, row_len):
            with kb.if_(e < total):
                yield e


def cooperative_bounded(kb: KernelBuilder, fold: int, rows: Val, row_len: Val) -> Iterator[Val]:
    """The compact form, iterated like :func:`cooperative`.

    The partial last workgroup loops ``for (e = elemBase + lid.x; e < wgEnd; e += WG)`` over only
    the elements it owns, instead of testing a guard ``row_len`` times; full workgroups take the
    constant-trip loop without a test.
    """
    for e, _ in cooperative_bounded_split(kb, fold, rows, row_len, None):
        yield e


def cooperative_bounded_split(
    kb: KernelBuilder, fold: int, rows: Val, row_len: Val, uniform: Val | None
) -> Iterator[tuple[Val, bool]]:
    """:func:`cooperative_bounded` with each of its two loops generated twice, under ``if
    (uniform)`` and its ``else``; yields ``(e, True)`` in the first copy, ``(e, False)`` in the
    second. ``uniform`` must be the same for every invocation (params and consts only), so a
    caller can leave out of the first copy a per-element test that the condition makes
    always true, without putting the loop's loads under a divergent branch. With ``uniform``
    None each loop is generated once, yielding ``(e, False)``.
    """
    elem_base, total = cooperative_span(kb, fold, rows, row_len)
    span = kb.let("span", _wg(kb) * row_len)
    with kb.if_(_full_tile(kb, elem_base, total, span)):
        yield from _split(kb, uniform, lambda: _tile_steps(kb, elem_base, row_len))
    with kb.else_():
        wg_end = kb.let("wgEnd", min_(elem_base + span, total))
        yield from _split(kb, uniform, lambda: _bounded_steps(kb, elem_base, wg_end))


def _bounded_steps(kb: KernelBuilder, elem_base: Val, wg_end: Val) -> Iterator[Val]:
    """``for (e = elemBase + lid.x; e < wgEnd; e += WG)``."""
    with kb.for_range("e", elem_base + kb.lid.x, wg_end, _wg(kb)) as e:
        yield e


def _split(
    kb: KernelBuilder, uniform: Val | None, loop: Callable[[], Iterator[Val]]
) -> Iterator[tuple[Val, bool]]:
    if uniform is None:
        for e in loop():
            yield e, False
        return
    with kb.if_(uniform):
        for e in loop():
            yield e, True
    with kb.else_():
        for e in loop():
            yield e, False
