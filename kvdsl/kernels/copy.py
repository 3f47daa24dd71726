"""``copy``: an identity copy of a BNSH cache (``src_k/src_v`` → ``present_key/present_value``).

Drop-in for the template's ``mode == "copy"`` branch. ``head_dim`` is the number of stored words
per row (compression changes only that). Walks: ``cooperative`` (the template's choice for every
vendor but Apple) and ``per_row`` (Apple). Params: ``count`` = rows (batch × kvHeads × seq).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvdsl.ir import Dispatch, Kernel, KernelBuilder
from kvdsl.kernels.config import common, contract, one_of, positive_int, scalar, times
from kvdsl.nodes import walks

ELEMENTS = ("f32", "f16", "i32", "u32")
WALKS = ("cooperative", "per_row")


@dataclass(frozen=True)
class CopyConfig:
    """A copy variant: words per row, their element type and the walk."""

    head_dim: int
    walk: str = "cooperative"
    present_type: str = "f32"
    workgroup_size: int = 64
    fold: int = 65535
    mode = "copy"

    def __post_init__(self) -> None:
        positive_int("head_dim", self.head_dim)
        one_of("walk", self.walk, WALKS)
        one_of("present_type", self.present_type, ELEMENTS)
        common(self)


def copy(cfg: CopyConfig, name: str = "copy") -> Kernel:
    """Build the copy kernel for ``cfg``."""
    kb = KernelBuilder(name, cfg.workgroup_size)
    elem = scalar(cfg.present_type)
    src_k = kb.binding("src_k", elem, "read")
    src_v = kb.binding("src_v", elem, "read")
    present_key = kb.binding("present_key", elem, "read_write")
    present_value = kb.binding("present_value", elem, "read_write")
    head_dim = kb.const("HEAD_DIM", scalar("u32"), cfg.head_dim)
    kb.workgroup_const("WG")
    rows = kb.param("count")
    if cfg.walk == "cooperative":
        for e in walks.cooperative(kb, cfg.fold, rows, head_dim):
            present_key[e] = src_k[e]
            present_value[e] = src_v[e]
    else:
        i = walks.per_row(kb, cfg.fold, rows)
        base = kb.let("base", i * head_dim)
        with walks.row_elements(kb, head_dim) as d:
            present_key[base + d] = src_k[base + d]
            present_value[base + d] = src_v[base + d]
    doc = "Copy the existing BNSH cache unchanged (dst index == src index)."
    kernel = kb.build(Dispatch(rows.node, cfg.workgroup_size, cfg.fold), doc)
    n = times(rows, head_dim)
    return contract(kernel, {b.name: n for b in kernel.bindings})
