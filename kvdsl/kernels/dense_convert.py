"""``dense_convert``: copies cache rows from one format to a dense one, each row's (or block's)
scale computed in the kernel (a runtime compressing an old prefix: f16 → int8, int8 → q4_0 ...).

``count`` rows (one (token, head) row each, in any order: BNSH rows, or a window of them) of
``src_k``, ``src_v`` in ``source`` are read as f32 and quantised into rows of ``present_key``,
``present_value`` in ``format``, row ``r`` to row ``r``:

- ``source`` ``f32`` or ``f16``: rows of ``head_dim`` values (f16 carried in ``vec2<u32>``
  words, no ``shader-f16``);
- ``source`` a dense format: rows of its ``ROW_WORDS`` u32 words, their scales inline or, with
  ``source_scales="side"``, in ``src_scales`` (``2 S`` f32 per row, K's then V's), each element
  dequantised as ``dense_read`` reads it (:meth:`kvdsl.nodes.formats.Format.decode`).

The store side is the dense quantiser (:func:`kvdsl.nodes.quantise.quantise_rows`); with
``scales="side"`` the destination's scales go to ``present_scales``. One invocation per ``vec4``
of a row, rows whole inside a workgroup; the reader of the result is ``dense_read``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from kvdsl.ir import Buffer, Kernel, KernelBuilder, Val, construct, f16, f32, u32, with_contract
from kvdsl.kernels.config import builds, choice, require
from kvdsl.kernels.extents import times
from kvdsl.kernels.dense import F32X4, LANES, DenseConfig, dense_rows, format_choice
from kvdsl.kernels.dense_fields import ScalePlace, require_format
from kvdsl.kernels.dense_modes import load_run, quantise_workgroup, require_quantised_rows
from kvdsl.nodes import walks, words
from kvdsl.nodes.formats import FORMATS, Format, format_of
from kvdsl.nodes.quantise import Quantiser

#: What a ``dense_convert`` source row holds: f32 or f16 values, or a built-in dense format
#: (any :class:`kvdsl.nodes.formats.Format` value is taken too).
Source = StrEnum("Source", {"F32": "f32", "F16": "f16"} | {n.upper(): n for n in FORMATS})


@dataclass(frozen=True)
class DenseConvertConfig(DenseConfig):
    """A ``dense_convert`` variant: the destination's format and scales' place (``format``,
    ``scales``), the source's (``source``, ``source_scales`` for a dense source)."""

    source: Source = format_choice(Source.F16)
    source_scales: ScalePlace = choice(ScalePlace.INLINE)
    mode = "dense_convert"

    def check_fields(self) -> None:
        super().check_fields()
        require(
            not self.fmt.rotated,
            "format",
            self.fmt.name,
            f"a format without a rotation of its own ({self.fmt.name}'s rows are written by"
            " dense_append, paged_append and qkv, which rotate K and V into its basis)",
        )
        src = self.source_fmt
        require(
            src is None or not src.rotated,
            "source",
            getattr(self.source, "value", self.source),
            "f32, f16 or a format without a rotation of its own (a rotated format's rows"
            " decode to its rotated basis)",
        )
        if src is None:
            require(
                self.source_scales is ScalePlace.INLINE,
                "source_scales",
                self.source_scales.value,
                f"'inline' for source {self.source.value!r} (its rows hold values, no scales)",
            )
            return
        require_format(src, self.source_scales, self.head_dim, "source_scales", "source")

    @property
    def source_fmt(self) -> Format | None:
        """The source's dense format, None for f32 or f16 values."""
        return None if self.source in (Source.F32, Source.F16) else format_of(self.source)

    @property
    def source_inline(self) -> bool:
        """Whether a dense source row's scale is stored inline."""
        return self.source_scales is ScalePlace.INLINE

    def default_workgroup_size(self) -> int:
        return quantise_workgroup(self)

    def check_schedule(self) -> None:
        require_quantised_rows(self)


@builds(DenseConvertConfig)
def dense_convert(cfg: DenseConvertConfig, name: str = "dense_convert") -> Kernel:
    """Build the ``dense_convert`` kernel for ``cfg``."""
    fmt, src = cfg.fmt, cfg.source_fmt
    kb = KernelBuilder(name, cfg.workgroup_size)
    if src is None:
        src_k, src_v = words.bindings(kb, ("src_k", "src_v"), _scalar(cfg.source), 4)
    else:
        src_k, src_v = (kb.binding(n, u32, "read") for n in ("src_k", "src_v"))
    src_side = None
    if src is not None and not cfg.source_inline:
        src_side = kb.binding("src_scales", f32, "read")
    q = Quantiser(fmt, cfg.inline, cfg.head_dim, cfg.workgroup_size)
    between = (
        {} if src is None else {"SRC_ROW_WORDS": src.row_words(cfg.head_dim, cfg.source_inline)}
    )
    f = dense_rows(kb, cfg, q, between=between)
    count = kb.param("count")

    it = f.walk(count, f"on a run of {q.vectors} vectors")
    if src is None:
        base = kb.let("srcBase", it.row * f.consts["HEAD_DIM_V4"])
        k, v = load_run(kb, (src_k, src_v), base, q, it.d)
    else:
        src_words = f.consts["SRC_ROW_WORDS"]
        kb.comment(f"The lane's run of the {src.name} source row, dequantised.")
        base = kb.let("srcBase", it.row * src_words)
        k = _decoded(kb, cfg, src, "k", src_k, src_side, base, it.row, q, it.d, 0)
        v = _decoded(kb, cfg, src, "v", src_v, src_side, base, it.row, q, it.d, src.stats)
    f.store(it.d, k, v, lambda: it.row, it.e >= count * f.lanes)
    what = cfg.source.value + (
        "" if src is None or src.ggml else f" (scales {cfg.source_scales.value})"
    )
    kind = fmt.name + ("" if fmt.ggml else f" (scales {cfg.scales.value})")
    doc = f"Copy {what} cache rows to {kind} rows, each row's scale reduced in the kernel."
    kernel = kb.build(f.dispatch(count), doc)
    src_per_row = cfg.head_dim if src is None else src_words.node
    extents = {"src_k": times(count, src_per_row), "src_v": times(count, src_per_row)}
    if src_side is not None:
        extents["src_scales"] = times(count, 2 * src.stats)
    extents |= f.extents(count)
    return walks.vector_extents(with_contract(kernel, extents))


def _scalar(source: Source):
    return f16 if source is Source.F16 else f32


def _decoded(
    kb: KernelBuilder,
    cfg: DenseConvertConfig,
    src: Format,
    which: str,
    cache: Buffer,
    side: Buffer | None,
    base: Val,
    row: Val,
    q: Quantiser,
    lane: Val,
    side_at: int,
) -> list[Val]:
    """The ``vec4<f32>`` lane ``lane`` holds (:meth:`kvdsl.nodes.quantise.Quantiser.vector_at`)
    of a dense source row (words
    at ``cache[base ..]``, side scales at ``side[row * 2S + side_at ..]``)."""

    def load(w: Val) -> Val:
        return cache[base + w]

    def stat(i: int) -> Val:
        return side[row * (2 * src.stats) + (side_at + i)]

    run = []
    for j in range(q.vectors):
        first = kb.let(f"{which}At{j}", q.vector_at(lane, j) * 4)
        lanes = [
            src.decode(kb, f"{which}{j}{c.upper()}", load, first + i if i else first, stat,
                       cfg.source_inline)
            for i, c in enumerate(LANES)
        ]  # fmt: skip
        run.append(kb.let(f"{which}{j}", construct(F32X4, *lanes)))
    return run
