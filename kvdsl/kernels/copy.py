"""``copy``: an identity copy of a BNSH cache (``src_k/src_v`` → ``present_key/present_value``).

Drop-in for the template's ``mode == "copy"`` branch. ``head_dim`` is the number of stored words
per row (compression changes only that). Walks (:mod:`kvdsl.nodes.walks`): ``flat``, one invocation
per ``vec4``, ``count * HEAD_DIM_V4`` items (scalar when ``head_dim`` does not divide by 4), and
the template's ``cooperative`` (every vendor but Apple) and ``per_row`` (Apple), whose dispatch the
block walk keeps. Params: ``count`` = rows (batch × kvHeads × seq).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvdsl.ir import Kernel, KernelBuilder, u32, with_contract
from kvdsl.kernels.config import (
    COPY_WALKS,
    Element,
    KernelConfig,
    MAX_HIDDEN,
    PRESENT,
    Walk,
    builds,
    choice,
    positive_int,
    require,
)
from kvdsl.kernels.extents import times

from kvdsl.kernels.plan import VectorWalk
from kvdsl.nodes import walks, words


@dataclass(frozen=True)
class CopyConfig(VectorWalk, KernelConfig):
    """A copy variant: words per row, their element type and the walk."""

    head_dim: int
    walk: Walk = choice(Walk.COOPERATIVE, COPY_WALKS)
    present_type: Element = choice(Element.F32)
    mode = "copy"

    def check_fields(self) -> None:
        positive_int("head_dim", self.head_dim)
        require(
            self.head_dim <= MAX_HIDDEN,
            "head_dim",
            self.head_dim,
            f"at most {MAX_HIDDEN} (one row must fit WebGPU's default "
            "max-storage-buffer-binding-size of 128 MiB)",
        )
        self.refuse_window(
            "position-independent: its kernel runs on any window of whole rows as it is, with"
            " count the window's rows"
        )


@builds(CopyConfig)
def copy(cfg: CopyConfig, name: str = "copy") -> Kernel:
    """Build the copy kernel for ``cfg``."""
    kb = KernelBuilder(name, cfg.workgroup_size)
    ty = cfg.present_type.scalar
    width = words.width(cfg.head_dim, (cfg.present_type,))
    src_k, src_v = words.bindings(kb, ("src_k", "src_v"), ty, width)
    present_key, present_value = words.bindings(kb, PRESENT, ty, width, "read_write")
    head_dim = kb.const("HEAD_DIM", u32, cfg.head_dim)
    kb.workgroup_const("WG")
    rows = kb.param("count")
    per_row = walks.vector_const(kb, head_dim, cfg.head_dim, width)
    plan = cfg.plan
    e = plan.vectors(kb, rows, per_row, width).e
    present_key[e] = src_k[e]
    present_value[e] = src_v[e]
    dispatch = plan.dispatch(rows, per_row)
    doc = "Copy the existing BNSH cache unchanged (dst index == src index)."
    kernel = kb.build(dispatch, doc)
    n = times(rows, head_dim)
    return walks.vector_extents(with_contract(kernel, {b.name: n for b in kernel.bindings}))
