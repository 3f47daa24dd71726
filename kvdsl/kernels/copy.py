"""``copy``: an identity copy of a BNSH cache (``src_k/src_v`` → ``present_key/present_value``).

Drop-in for the template's ``mode == "copy"`` branch. ``head_dim`` is the number of stored words
per row (compression changes only that). Walks (:mod:`kvdsl.nodes.flat`): ``flat``, one invocation
per ``vec4``, ``count * HEAD_DIM_V4`` items (scalar when ``head_dim`` does not divide by 4), and
the template's ``cooperative`` (every vendor but Apple) and ``per_row`` (Apple), whose dispatch the
block walk keeps. Params: ``count`` = rows (batch × kvHeads × seq).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvdsl.ir import Kernel, KernelBuilder
from kvdsl.kernels.config import common, contract, one_of, positive_int, scalar, times
from kvdsl.nodes import flat

ELEMENTS = ("f32", "f16", "i32", "u32")
WALKS = ("cooperative", "per_row", "flat")


@dataclass(frozen=True)
class CopyConfig:
    """A copy variant: words per row, their element type and the walk."""

    head_dim: int
    walk: str = "cooperative"
    present_type: str = "f32"
    workgroup_size: int | None = None  # 256 for the flat walk, else 64
    fold: int = 65535
    mode = "copy"

    def __post_init__(self) -> None:
        positive_int("head_dim", self.head_dim)
        one_of("walk", self.walk, WALKS)
        flat.resolve_workgroup(self)
        one_of("present_type", self.present_type, ELEMENTS)
        common(self)


def copy(cfg: CopyConfig, name: str = "copy") -> Kernel:
    """Build the copy kernel for ``cfg``."""
    kb = KernelBuilder(name, cfg.workgroup_size)
    ty = cfg.present_type
    width = flat.width(cfg.head_dim, (ty,))
    src_k = flat.binding(kb, "src_k", scalar(ty), width, "read")
    src_v = flat.binding(kb, "src_v", scalar(ty), width, "read")
    present_key = flat.binding(kb, "present_key", scalar(ty), width, "read_write")
    present_value = flat.binding(kb, "present_value", scalar(ty), width, "read_write")
    head_dim = kb.const("HEAD_DIM", scalar("u32"), cfg.head_dim)
    kb.workgroup_const("WG")
    rows = kb.param("count")
    per_row = flat.vector_const(kb, head_dim, cfg.head_dim, width)
    e = flat.walk(kb, cfg, rows, per_row, width).e
    present_key[e] = src_k[e]
    present_value[e] = src_v[e]
    dispatch = flat.dispatch(rows, per_row, cfg)
    doc = "Copy the existing BNSH cache unchanged (dst index == src index)."
    kernel = kb.build(dispatch, doc)
    n = times(rows, head_dim)
    return flat.vector_extents(contract(kernel, {b.name: n for b in kernel.bindings}))


def catalog_variants(models: dict[str, Any]) -> dict[str, CopyConfig]:
    """The flat copy variants (the drop-in ones are named in :mod:`kvdsl.catalog`)."""
    v: dict[str, CopyConfig] = {}
    for key, m in models.items():
        v[f"copy_flat_{key}"] = CopyConfig(m.head_dim, walk="flat")
    v["copy_flat_f16_llama31_8b"] = CopyConfig(128, walk="flat", present_type="f16")
    v["copy_flat_int8_llama31_8b"] = CopyConfig(128, walk="flat", present_type="i32")
    # A packed int4 row of head dim 128 is 64 u32 words.
    v["copy_flat_int4_llama31_8b"] = CopyConfig(64, walk="flat", present_type="u32")
    return v
