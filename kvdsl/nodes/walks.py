"""Walks: which invocation touches which element of a span of contiguous rows.

- **per-row**: invocation ``i`` of the folded dispatch owns row ``i`` and streams its
  ``row_len`` elements in a loop (few invocations, each touching a contiguous run);
- **cooperative**: workgroup ``w`` owns rows ``[w*WG, (w+1)*WG)``; at step ``s`` lane ``l`` touches
  element ``s*WG + l`` of that span, so adjacent lanes hit adjacent addresses on both sides.

Both dispatch ``ceil(rows / WG)`` workgroups folded at ``fold``.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from kvdsl.ir import KernelBuilder, Val
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


@contextmanager
def cooperative(kb: KernelBuilder, fold: int, rows: Val, row_len: Val) -> Iterator[Val]:
    """The element ``e`` this lane touches at each step, inside its bound guard."""
    elem_base, total = cooperative_span(kb, fold, rows, row_len)
    with kb.for_range("s", as_val(0, u32), row_len) as s:
        e = kb.let("e", elem_base + s * _wg(kb) + kb.lid.x)
        with kb.if_(e < total):
            yield e


@contextmanager
def cooperative_bounded(kb: KernelBuilder, fold: int, rows: Val, row_len: Val) -> Iterator[Val]:
    """The compact form: ``for (e = elemBase + lid.x; e < min(elemBase + WG*len, total); e += WG)``.

    The loop runs only over elements this workgroup owns, so a partial last workgroup stops early
    instead of testing a guard ``row_len`` times.
    """
    elem_base, total = cooperative_span(kb, fold, rows, row_len)
    wg_end = kb.let("wgEnd", _min(elem_base + _wg(kb) * row_len, total))
    with kb.for_range("e", elem_base + kb.lid.x, wg_end, _wg(kb)) as e:
        yield e


def _min(a: Val, b: Val) -> Val:
    from kvdsl.ir import min_

    return min_(a, b)
