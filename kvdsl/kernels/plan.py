"""The walk a config's kernel takes: per row, flat vectors or pairs, in blocks or not.

A :class:`WalkPlan` holds what the choice reads of a config (each walked config makes one, its
``plan``); the kernels ask it and pass the nodes of :mod:`kvdsl.nodes.walks` plain values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvdsl.ir import Dispatch, KernelBuilder, Val
from kvdsl.kernels.config import (
    TEMPLATE_WALKS,
    Element,
    Reduction,
    RotaryHalf,
    Walk,
    require,
    rotary_pairs,
    walk_workgroup,
)
from kvdsl.nodes import walks
from kvdsl.nodes.walks import Item, block_lanes, lanes


def rows_workgroup(size: int, lanes: int) -> int:
    """The default workgroup of a walk that holds rows whole: the most multiples of a row's
    ``lanes`` invocations within ``size`` (one row where it is longer)."""
    return size - size % lanes or lanes


def require_whole_rows(workgroup_size: int, lanes: int, what: str, verb: str = "reduced") -> None:
    """``workgroup_size`` a multiple of a row's ``lanes`` invocations (``what``, e.g. ``"lanes
    of a row with a format"``): rows are ``verb`` whole inside a workgroup."""
    require(
        workgroup_size % lanes == 0,
        "workgroup_size",
        workgroup_size,
        f"a multiple of the {lanes} {what} (rows are {verb} whole inside a workgroup)",
    )


@dataclass(frozen=True)
class WalkPlan:
    """The fields of a config the walk depends on: its walk, row length, workgroup size and fold,
    the K transforms (``rotary``, ``k_norm`` and its ``reduction``), whether rows are int4 or loaded
    as f16, and the config's ``pairs`` request (None: the default)."""

    walk: Walk
    head_dim: int
    workgroup_size: int
    fold: int
    rotary: bool = False
    k_norm: bool = False
    reduction: Reduction = Reduction.WORKGROUP
    int4: bool = False
    f16_input: bool = False
    pairs: bool | None = None
    rotary_half: int | None = None

    @property
    def blocks(self) -> bool:
        """Whether the kernel keeps the template's dispatch (a template walk)."""
        return self.walk is not Walk.FLAT

    @property
    def block_walk(self) -> bool:
        """Whether a template walk's kernel runs the flat program in blocks.

        The block walk keeps the template's bindings, params and dispatch and serves every
        template config but two, which keep the template's walk: K RMSNorm (reduced in workgroup
        memory, so each step must hold whole rows) when neither up to 256 lanes nor ``WG`` is a
        multiple of a row's items that divides the block, and int4 rows the flat walk cannot pack
        four elements at a time.
        """
        if self.walk not in TEMPLATE_WALKS:
            return False
        width = lanes(self.head_dim, self.rotary, self.rotary_half)
        if self.int4 and width == 1:
            return False
        if self.k_norm:
            items = self.head_dim // width // (2 if self._pairs else 1)
            return block_lanes(self.workgroup_size, items, whole_rows=True) % items == 0
        return True

    @property
    def program(self) -> bool:
        """Whether the kernel is the flat walk's program: ``walk="flat"``, or a template walk the
        block walk serves."""
        return self.walk is Walk.FLAT or self.block_walk

    @property
    def pairs_apply(self) -> bool:
        """Whether the pair walk can serve the config: rotary or K RMSNorm (the pair is then the
        row's vectors ``d`` and ``d + HALF_V4``), half a row a whole number of ``vec4``; rotary
        over the whole head (a partial rotary's pairs are not half a row apart)."""
        whole = (
            not self.rotary or rotary_pairs(self.head_dim, self.rotary_half) * 2 == self.head_dim
        )
        return (self.rotary or self.k_norm) and self.head_dim % (2 * 4) == 0 and whole

    @property
    def uses_pairs(self) -> bool:
        """Whether the kernel walks one invocation per pair of vectors half a row apart.

        ``pairs`` where set; unset, the rotary kernels loading f16 (a vector of f16 is half the
        bytes of an f32 one, so an invocation moves too little alone), and the K RMSNorm kernels
        that reduce in workgroup memory (twice the bytes in flight before the barrier, half the
        partials per row) or pack int4 in blocks.
        """
        return self.program and self._pairs

    def vectors(
        self, kb: KernelBuilder, rows: Val, per_row: Val, width: int, guard: bool = True
    ) -> Item:
        """The vector this invocation owns (:func:`kvdsl.nodes.walks.vectors`)."""
        return walks.vectors(kb, self.fold, rows, per_row, width, guard, self.blocks)

    def pair_items(self, kb: KernelBuilder, rows: Val, half: Val, guard: bool = True) -> Item:
        """The pair this invocation owns (:func:`kvdsl.nodes.walks.pairs`)."""
        return walks.pairs(kb, self.fold, rows, half, guard, self.blocks)

    def items(self, kb: KernelBuilder, rows: Val, per_row: Val, width: int, half: Val) -> Item:
        """The pair (:meth:`pair_items`) where the kernel :attr:`uses_pairs`, else the vector."""
        if self.uses_pairs:
            return self.pair_items(kb, rows, half)
        return self.vectors(kb, rows, per_row, width)

    def dispatch(self, rows: Val, per_row: Val) -> Dispatch:
        """``rows`` rows of ``per_row`` items (:func:`kvdsl.nodes.walks.dispatch`)."""
        return walks.dispatch(rows, per_row, self.workgroup_size, self.fold, self.blocks)

    def row_dispatch(self, kb: KernelBuilder, rows: Val, width: int) -> Dispatch:
        """The dispatch of :meth:`items`: ``HALF_V4`` pairs or ``HEAD_DIM`` vectors a row (the
        consts the kernel declared)."""
        if self.uses_pairs:
            return self.dispatch(rows, walks.named(kb, "HALF", 4))
        return self.dispatch(rows, walks.named(kb, "HEAD_DIM", width))

    @property
    def _pairs(self) -> bool:
        if self.pairs is not None:
            return self.pairs
        if not self.pairs_apply:
            return False
        if self.k_norm:
            return self.reduction is Reduction.WORKGROUP or (self.blocks and self.int4)
        return self.f16_input


class VectorWalk:
    """The walk of a config with the fields ``walk``, ``head_dim``, ``workgroup_size`` and
    ``fold``: its plan and the walk's default workgroup size. A mixin of the config classes (the
    copies' directly), which declare the fields."""

    walk: Walk
    head_dim: int
    workgroup_size: int
    fold: int

    def default_workgroup_size(self) -> int:
        """The walk's default workgroup size."""
        return walk_workgroup(self.walk)

    def walk_plan(self, **transforms: Any) -> WalkPlan:
        """The plan of these fields and ``transforms`` (:class:`WalkPlan`'s other fields)."""
        return WalkPlan(self.walk, self.head_dim, self.workgroup_size, self.fold, **transforms)

    @property
    def plan(self) -> WalkPlan:
        """The walk of the kernel."""
        return self.walk_plan()


class RotaryWalk(RotaryHalf, VectorWalk):
    """The walk of the modes that may rotate K (``merge_share``, ``window_shift`` and, with
    K RMSNorm added, the row program's): the plan adds ``rotary``, f16 input and ``pairs``, which
    is checked after the workgroup size."""

    input_type: Element
    pairs: bool | None

    def check_schedule(self) -> None:
        """``pairs`` where the pair walk can serve the config (after the workgroup's checks)."""
        require_pairs(self.plan)

    def walk_plan(self, **transforms: Any) -> WalkPlan:
        f16_input = self.input_type is Element.F16
        return super().walk_plan(
            rotary=self.rotary,
            f16_input=f16_input,
            pairs=self.pairs,
            rotary_half=self.rotary_half if self.rotary else None,
            **transforms,
        )


def require_pairs(plan: WalkPlan) -> None:
    """A config's ``pairs``: None (the mode's default), or a bool, True only where the pair walk
    can serve the config (:attr:`WalkPlan.pairs_apply`)."""
    pairs = plan.pairs
    if pairs is None:
        return
    require(
        isinstance(pairs, bool), "pairs", pairs, "true, false or unset (None: the mode's default)"
    )
    if pairs:
        require(
            plan.walk is Walk.FLAT and plan.pairs_apply,
            "pairs",
            pairs,
            "None or False unless walk='flat', rotary=True or k_norm=True, and head_dim % 8 == 0 "
            "(one invocation per pair of vec4 half a row apart; with rotary, only over the whole"
            " head: rotary_half unset or head_dim / 2)",
        )
