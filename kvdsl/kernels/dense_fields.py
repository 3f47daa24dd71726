"""The fields the dense formats' modes share, and their checks: where a row's scales sit
(:class:`ScalePlace`), how a quantiser stores a workgroup's rows (:class:`DenseWalk`), and the
refusals of a format, a rotation and a walk that ``dense_append``,
``paged_append``, ``qkv``, ``dense_convert`` and ``attend`` apply to their own fields.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from enum import StrEnum
from typing import Any, ClassVar

from kvdsl.kernels.config import Slot, one_of, require, unset
from kvdsl.nodes import rotation
from kvdsl.nodes.formats import Format
from kvdsl.nodes.quantise import Quantiser, row_lanes


class DenseWalk(StrEnum):
    """How ``dense_append`` and ``dense_build`` store a workgroup's rows
    (:class:`kvdsl.nodes.quantise.Quantiser`): each lane its own run's words (``vec4<u32>``
    where aligned), or staged in workgroup memory and stored together, adjacent lanes on
    adjacent words."""

    RUNS = "runs"
    STAGED = "staged"
    STRIDED = "strided"


class ScalePlace(StrEnum):
    """Where a dense row's scale sits: inline before its codes (ORT's layout) or in a side
    buffer."""

    INLINE = "inline"
    SIDE = "side"


class Scales:
    """A mixin of the configs with a ``scales`` field (:class:`ScalePlace`), which declare it."""

    scales: ScalePlace

    @property
    def inline(self) -> bool:
        """Whether a dense row's scales sit inside it (always, for f32 and f16 rows)."""
        return self.scales is ScalePlace.INLINE

    def no_scales(self) -> None:
        """``scales`` unset, for a cache without a format: f32 and f16 rows have no scales."""
        why = "without a format: an f32 or f16 cache has no scales"
        unset("scales", self.scales, ScalePlace.INLINE, why)


@dataclass(frozen=True)
class LaneWalk:
    """The quantiser's walk of a writer into a dense format (a mixin of ``dense_append``'s
    and ``qkv``'s configs, which give ``fmt``, ``inline``, ``head_dim``, ``workgroup_size``,
    ``whole_rotary`` and ``default_walk``): ``walk`` (unset: the config's default), K's and V's
    rows in invocations of their own (``split``) or together, and at most ``run`` vectors a lane
    (None: the longest run)."""

    _: KW_ONLY
    walk: DenseWalk | None = Slot(None, DenseWalk, derive=lambda cfg: cfg.default_walk())
    split: bool = True
    run: int | None = None
    #: Whether runs holding whole-head rotary's NeoX pairs come before every other default.
    PAIRS_FIRST: ClassVar[bool] = False

    def default_walk(self) -> DenseWalk | None:
        """The walk of a config that leaves it unset (None without a format): ggml's rows and
        inline int8 rows staged (their words are not 16-byte aligned), a side-scale row's runs
        (``vec4<u32>`` stores), an inline 4-bit row strided, or in runs where whole-head
        rotary's NeoX pairs fit in a lane's run (with :attr:`PAIRS_FIRST`, before the other
        rules: no staging, no partner loads)."""
        if self.fmt is None:
            return None
        paired = self.whole_rotary and Quantiser.pairs_fit(self.fmt, self.head_dim)
        if paired and self.PAIRS_FIRST:
            return DenseWalk.RUNS
        if self.fmt.ggml or (self.inline and self.fmt.bits == 8):
            return DenseWalk.STAGED
        return DenseWalk.RUNS if not self.inline or paired else DenseWalk.STRIDED

    def check_lane_walk(self) -> None:
        """The walk and run the format can take (:func:`require_walk`)."""
        require_walk(self.fmt, self.walk, self.run)

    @property
    def row_lanes(self) -> int:
        """Invocations per row (:func:`kvdsl.nodes.quantise.row_lanes`)."""
        return row_lanes(self.fmt, self.head_dim, self.run or 0)

    @property
    def quantiser(self) -> Quantiser | None:
        """The quantising row program of the format (None without one), its scales' place,
        head dim, workgroup and walk; rotary over the whole head pairs the runs where they
        fit."""
        if self.fmt is None:
            return None
        staged, strided = self.walk is DenseWalk.STAGED, self.walk is DenseWalk.STRIDED
        run = self.run or 0
        fits = Quantiser.pairs_fit(self.fmt, self.head_dim, run)
        paired = self.whole_rotary and not strided and fits
        return Quantiser(
            self.fmt, self.inline, self.head_dim, self.workgroup_size, staged, strided,
            self.split, paired, run,
        )  # fmt: skip


def require_format(
    fmt: Format, scales: ScalePlace, head_dim: int, field: str = "scales", role: str = "format"
) -> None:
    """Rows of ``head_dim`` values in dense format ``fmt`` with its scales at ``scales`` (the
    config's field ``field``; ``role`` names the format in the messages, e.g. ``"source"``):
    ggml's scales inline (its f16 scales sit inside its blocks), ``head_dim`` a multiple of the
    format's values a word or block."""
    require(
        not (fmt.ggml and scales is ScalePlace.SIDE),
        field,
        scales.value,
        f"'inline' for {'' if role == 'format' else role + ' '}{fmt.name} (ggml's f16 scales"
        " sit inside its blocks)",
    )
    require(fmt.takes(head_dim), "head_dim", head_dim, f"{fmt.head_dims()} for {role} {fmt.name!r}")


def require_rotation(fmt: Format | None, block: Any, head_dim: int, plain: str = "") -> None:
    """A writer's or a reader's ``rotation`` (:func:`kvdsl.nodes.rotation.check_block`): 0 for a
    format that carries a rotation of its own (:attr:`kvdsl.nodes.formats.Format.rotated`), and
    0 without a format (``fmt`` None: ``plain`` says how such rows are stored)."""
    wrong = rotation.check_block(block, head_dim)
    require(wrong is None, "rotation", block, wrong or "")
    if fmt is None:
        why = f"a rotation serves the quantiser: {plain}"
        unset("rotation", block, 0, f"without a format ({why})")
        return
    require(
        not (block and fmt.rotated),
        "rotation",
        block,
        f"0 for format {fmt.name} (it carries its own rotation: ORT's unsigned Walsh-Hadamard"
        " transform of the whole head, K and V alike)",
    )


def require_walk(fmt: Any, walk: Any, run: Any) -> None:
    """Refuse a quantiser walk and run the format cannot take: ``walk`` one of
    :class:`DenseWalk`, ``run`` unset or 1, 2, 4 or 8 vectors, and no strided walk for ggml's
    blocks."""
    one_of("walk", walk, DenseWalk)
    require(
        run is None or (type(run) is int and run in (1, 2, 4, 8)),
        "run",
        run,
        "None (the longest run) or 1, 2, 4 or 8 vectors a lane",
    )
    require(
        run is None or not fmt.whole_row_lane,
        "run",
        run,
        f"None for {fmt.name} (one lane holds a whole row: its norm is summed in ORT's order)",
    )
    require(
        not (fmt.ggml and walk is DenseWalk.STRIDED),
        "walk",
        walk.value,
        f"'runs' or 'staged' for {fmt.name} (a ggml lane holds one whole block)",
    )
