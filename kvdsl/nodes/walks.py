"""The per-row walk: invocation ``i`` of the folded dispatch (``ceil(rows / WG)`` workgroups
folded at ``fold``) owns row ``i`` and streams its ``row_len`` elements in a loop.

The template's walk for every mode but the copies; kvdsl keeps it only where the block walk
(:func:`kvdsl.nodes.flat.block_walk`) cannot serve a template config: K RMSNorm rows of more
items than a workgroup holds (more than 256, and not dividing the template's workgroup), and
int4 rows not of four elements.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from kvdsl.ir import KernelBuilder, Val
from kvdsl.ir.builder import as_val
from kvdsl.ir.types import u32
from kvdsl.nodes.index import flat_index


def per_row(kb: KernelBuilder, fold: int, rows: Val, name: str = "i") -> Val:
    """The row this invocation owns; invocations past ``rows`` return."""
    kb.comment("Thread i streams one contiguous row.")
    return flat_index(kb, fold, name, bound=rows)


@contextmanager
def row_elements(kb: KernelBuilder, row_len: Val | int, name: str = "d") -> Iterator[Val]:
    """``for (var d = 0u; d < row_len; d = d + 1u)``: the elements of one row, in order."""
    with kb.for_range(name, as_val(0, u32), row_len) as d:
        yield d
