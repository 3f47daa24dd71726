"""The dense quantiser: one row program that any mode calls to quantise the K and V rows its
invocations hold and store them in a dense format (:mod:`kvdsl.nodes.formats`), each row's (or
ggml block's) scale computed in the kernel.

A mode walks its rows its own way and hands each row to :func:`quantise_rows`:

- :class:`Quantiser` says how a row of ``head_dim`` values of format ``fmt`` (scales inline or in
  a side buffer) is spread over a workgroup's invocations: :attr:`Quantiser.lanes` invocations
  per row, each holding :attr:`Quantiser.vectors` ``vec4<f32>`` of it, its ``j``-th the row's
  vector :meth:`Quantiser.vector_at` (a run of consecutive vectors, or strided). A row's lanes
  are adjacent invocations of one workgroup (local ids ``lid - lane .. lid - lane + lanes -
  1``), so ``workgroup_size`` divides by ``lanes``.
- The caller declares the cache bindings with :func:`cache_binding` (u32 words, or
  ``vec2``/``vec4<u32>`` where a lane's words are that aligned: :attr:`Quantiser.store_width`),
  loads its lane's K and V values (rotated, K-normed: as they are to be stored), then calls
  :func:`quantise_rows` with a :class:`Destination`: the bindings and a hook that gives the
  stored row's place (:class:`RowPlace`, the u32 word index of the row in the cache binding and
  the f32 index of its side scales), so that contiguous, buffer-sharing, paged and fused
  kernels share one quantiser. The hook is called after the row's statistics are reduced, in
  the lanes that store, so it may read a page table or a slot mapping that is only valid for
  real rows.
- Every invocation of the workgroup calls :func:`quantise_rows` in uniform control flow (it may
  wait at a workgroup barrier): an invocation past the caller's rows holds a copy of a real
  row's values in a row of its own and is named by ``Destination.skip``, as is a row the cache
  does not take. Skipped lanes leave after the barrier (:meth:`KernelBuilder.leave_if`), before
  anything is stored; what the caller builds after the call runs only in the storing lanes. A
  caller that calls it more than once per invocation (a loop over rows) waits at a barrier
  between the calls, as workgroup memory is reused.

The row program (the *run* walk): a dense format's lane holds 16 values (int8: four code words)
or 32 (4-bit: four code words) where the row allows, reduces its run's statistic in order and
writes it to workgroup memory, K's and V's in one slot; after one barrier every lane combines its
row's few partials in order (exact: max and min, so every lane computes the same scale), packs
its own code words and stores them, as one ``vec4<u32>`` where the row's words are 16-byte
aligned (side scales), else as ``vec2<u32>`` or words; lane 0 stores the row's scales. A ggml
lane holds one 32-value block and computes its block's scale itself, with no cross-lane
reduction; the word of a pair of blocks that holds the even block's last codes and the odd
block's f16 scale is written by the even block's lane, which reads its neighbour's scale from
workgroup memory after one barrier (rows of one block pass none).

The package: :mod:`.quantiser` (the row program's shape and what a caller gives it), :mod:`.dense`
(a dense format's rows), :mod:`.ggml` (ggml's blocks), :mod:`.rows` (what both share: a run's
statistic, the row's place and stores, the workgroup's staged rows); :func:`quantise_rows`, here,
checks the caller's arguments and hands the rows to one of the two.
"""

from __future__ import annotations

from typing import Sequence

from kvdsl.ir import KernelBuilder, Val
from kvdsl.nodes.quantise.dense import dense_rows
from kvdsl.nodes.quantise.ggml import ggml_rows
from kvdsl.nodes.quantise.quantiser import (
    Destination,
    Quantiser,
    RowPlace,
    cache_binding,
    row_lanes,
    run_vectors,
)
from kvdsl.nodes.quantise.rows import tensors

__all__ = [
    "Destination",
    "Quantiser",
    "RowPlace",
    "cache_binding",
    "quantise_rows",
    "row_lanes",
    "run_vectors",
]


def quantise_rows(
    kb: KernelBuilder,
    q: Quantiser,
    lane: Val,
    k: Sequence[Val],
    v: Sequence[Val] | None,
    dest: Destination,
) -> None:
    """Quantise and store the K and V rows the workgroup's lanes hold.

    This invocation is lane ``lane`` (u32, ``0 .. q.lanes - 1``) of its row, holding its
    ``q.vectors`` ``vec4<f32>`` values of K (``k``) and of V (``v``), the ``j``-th the row's
    vector ``q.vector_at(lane, j)``; every invocation
    of the workgroup calls this in uniform control flow (see the module docstring). After the
    call the lanes of ``dest.skip`` have left. With ``q.split`` the lane holds one row, K's or
    V's as ``dest.tensor`` says, its values ``k`` (``v`` None).

    Each lane stores its own words (``vec4<u32>`` where aligned), or with ``q.staged`` writes
    them to workgroup memory, the row's first lane its row's place; after a barrier the
    workgroup stores its rows' words together, adjacent lanes on adjacent words of a row.
    """
    fmt = q.fmt
    if q.split != (v is None) or q.split != (dest.tensor is not None):
        raise ValueError(
            "split rows (Quantiser.split) take one tensor's values (v None) and"
            " Destination.tensor; rows of both take K's and V's and no tensor"
        )
    if len(k) != q.vectors or (v is not None and len(v) != q.vectors):
        raise ValueError(
            f"quantise_rows takes {q.vectors} vectors of K and of V per lane (format"
            f" {fmt.name}, head dim {q.head_dim}), not {len(k)} and {len(v or [])}"
        )
    if (dest.scales is None) != q.inline:
        want = "no side scales binding" if q.inline else "a side scales binding"
        raise ValueError(f"format {fmt.name} with scales {_place(q)} needs {want}")
    for b in (dest.key, dest.value):
        if b.binding.elem != q.cache_elem:
            raise ValueError(
                f"cache binding {b.binding.name} holds {b.binding.elem}; format {fmt.name} with"
                f" scales {_place(q)} stores {q.cache_elem} (declare it with cache_binding)"
            )
    if q.workgroup_size % q.lanes:
        raise ValueError(
            f"workgroup_size {q.workgroup_size} is not a multiple of the {q.lanes} lanes of a"
            " row (rows are reduced whole inside a workgroup)"
        )
    (ggml_rows if fmt.ggml else dense_rows)(kb, q, lane, tensors(k, v), dest)


def _place(q: Quantiser) -> str:
    return "inline" if q.inline else "side"
