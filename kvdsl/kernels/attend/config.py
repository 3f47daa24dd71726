"""``attend``'s config (:class:`AttendConfig`), the layouts it names and the constants its kernels
and :func:`~kvdsl.kernels.attend.plan.plan` share; the merge's config (:class:`AttendMergeConfig`,
:func:`merge_config`) and the ``rowBlocks`` param as a formula (:func:`row_blocks`)."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, fields
from enum import StrEnum

from kvdsl.ir import f32, vec
from kvdsl.kernels.config import (
    FLOATS,
    MAX_STORAGE_BUFFERS,
    Element,
    CacheConfig,
    FormatSlot,
    RowLayout,
    choice,
    multiple_of,
    positive_int,
    query_heads,
    require,
    unset,
    where_set,
)
from kvdsl.kernels.dense import ScalePlace, require_format, require_rotation
from kvdsl.kernels.dense_fields import Scales
from kvdsl.kernels.kivi import require_groups, require_whole_groups
from kvdsl.kernels.paged import PageFields
from kvdsl.nodes.formats import FORMATS, Format, format_of
from kvdsl.nodes import rotation
from kvdsl.nodes.paged import PagedRows, PageLayout, Pool

#: The logit of a key a query does not see (below any real logit; ``exp`` of it less the
#: row's maximum is 0 in f32).
HIDDEN = -3.0e38
#: Query rows one workgroup holds (their outputs live in each invocation's registers).
MAX_ROWS = 8
MAX_QUERIES = 8
#: The workgroups :func:`~kvdsl.kernels.attend.plan.plan` aims a dispatch at (WebGPU tells no
#: count of compute units): measured on an H100 (benchmarks/results/attention), aiming at 1,024
#: left batch 1 at chunks of 128-256 keys, up to 65% slower than the best candidate, where a
#: workgroup's fixed cost (its barriers, the merge's extra partials) outweighs the parallelism it
#: adds; aiming at 256 picks within 10% of the best at every size and cache timed but one.
TARGET_WORKGROUPS = 256
#: WebGPU's default workgroup memory, in bytes.
WORKGROUP_BYTES = 16384
V4 = vec(4, f32)
#: The most cache units (16 bytes each, but for f16 rows of 4k + 4 halves) an invocation loads
#: back to back before using them when it scores a key: a whole row up to head_dim 128 f32 or
#: 256 f16; a longer row takes two such runs (a register budget).
ROW_LOADS = 32
#: Keys an invocation scores each trip of the scores' loop: each query vector read from
#: workgroup memory serves them all (their rows' loads share the ROW_LOADS budget).
SCORE_KEYS = 2
#: Keys an invocation's value loop loads back to back each trip.
VALUE_KEYS = 8
#: Chunks the merge reads back to back each trip.
MERGE_CHUNKS = 4


#: The template's quantised caches (``build_quant`` and ``append_quant``): their bits by name.
TEMPLATE_BITS = {"template_int8": 8, "template_int4": 4}
#: KIVI's caches (``kivi_append`` and ``kivi_flush``): their bits per code by name.
KIVI_BITS = {"kivi2": 2, "kivi4": 4}
#: Consecutive keys an invocation scores each trip over a KIVI cache: a K code word holds
#: ``32 / bits`` keys of one channel and a stat word ``kivi_group`` keys, so each word loaded
#: (and each channel's scale and minimum) serves them all; a divisor of every word and group.
KIVI_KEYS = 4
#: What a cache row may be besides the f32 or f16 of ``cache_type``: a built-in format of
#: :mod:`kvdsl.nodes.formats`, the template's int8 and int4 or KIVI's 2-bit and 4-bit;
#: ``format`` also takes any :class:`kvdsl.nodes.formats.Format` value.
AttendFormat = StrEnum(
    "AttendFormat",
    {n.upper(): n for n in FORMATS}
    | {n.upper(): n for n in TEMPLATE_BITS}
    | {n.upper(): n for n in KIVI_BITS},
)


class CacheLayout(StrEnum):
    """Where the cache's rows live: a contiguous BNSH cache, or pages of a pool."""

    BNSH = "bnsh"
    PAGED = "paged"


@dataclass(frozen=True)
class AttendConfig(PagedRows, PageFields, Scales, CacheConfig):
    """Decode attention over a cache of ``kv_heads`` × ``head_dim`` rows for ``q_heads`` query
    heads and up to ``max_queries`` new tokens a sequence: the cache's layout and element type
    (``cache_type``, or a quantised ``format`` with its ``scales`` inline or aside), Q's and O's
    layouts and types, and the options (a sliding window, soft-capping, sinks)."""

    q_heads: int
    _: KW_ONLY
    max_queries: int = 1
    cache: CacheLayout = choice(CacheLayout.BNSH)
    cache_type: Element = choice(Element.F32, FLOATS)
    q_layout: RowLayout = choice(RowLayout.BNSH)
    q_type: Element = choice(Element.F32, FLOATS)
    o_layout: RowLayout = choice(RowLayout.BNSH)
    o_type: Element = choice(Element.F32, FLOATS)
    sliding_window: bool = False
    softcap: bool = False
    sinks: bool = False
    # A quantised cache (None: cache_type's f32 or f16 rows): a format of kvdsl.nodes.formats,
    # its scales inline or in their own binding, or the template's int8 / int4.
    format: AttendFormat | None = FormatSlot(None, AttendFormat)
    scales: ScalePlace = choice(ScalePlace.INLINE)
    # Q rotated by the signed Walsh-Hadamard matrix over blocks of this many dimensions (the
    # head_dim: the whole head) as it is loaded, for a cache whose K rows were rotated so
    # (kvdsl.reference.rotation); 0: Q as given. V is stored as it is: the output needs no
    # rotation back. A format with a rotation of its own (ort_q4) takes 0: Q is rotated by the
    # format's, and the output rotated back by it (its V rows are rotated too).
    rotation: int = 0
    # KIVI's cache (format kivi2 or kivi4): K's tokens (and V's channels) a scale; 0 otherwise.
    kivi_group: int = where_set(0)
    mode = "attend"

    def check_fields(self) -> None:
        query_heads(self.q_heads, self.kv_heads)
        positive_int("head_dim", self.head_dim, 256)
        multiple_of("head_dim", self.head_dim, 4)
        positive_int("max_queries", self.max_queries, MAX_QUERIES)
        self.check_pages(None)
        self.refuse_window()
        wrong = rotation.check_block(self.rotation, self.head_dim)
        require(wrong is None, "rotation", self.rotation, wrong or "")
        self._check_format()
        n = self.storage_buffers
        require(
            n <= MAX_STORAGE_BUFFERS or self.kivi_bits is None,
            "sinks",
            self.sinks,
            f"false for a paged KIVI cache (sinks make {n} storage buffers, past WebGPU's"
            f" default {MAX_STORAGE_BUFFERS})",
        )
        require(
            n <= MAX_STORAGE_BUFFERS,
            "scales",
            self.scales.value,
            f"'inline' with sinks in a paged cache of separate pools (side scales make {n}"
            f" storage buffers, past WebGPU's default {MAX_STORAGE_BUFFERS})",
        )

    def _check_format(self) -> None:
        if self.kivi_bits is None:
            unset("kivi_group", self.kivi_group, 0, "without a KIVI format (kivi2 or kivi4)")
        if self.format is None:
            self.no_scales()
            return
        name = self.format_name
        words = f"with format {name!r}: the cache holds the format's words"
        unset("cache_type", self.cache_type, Element.F32, words)
        if self.kivi_bits is not None:
            self._check_kivi()
            return
        if self.template_bits is None:
            require_format(self.fmt, self.scales, self.head_dim)
            require_rotation(self.fmt, self.rotation, self.head_dim)
            return
        require(
            self.cache is CacheLayout.BNSH,
            "cache",
            self.cache.value,
            f"'bnsh' for format {name!r} (the template's cache is contiguous)",
        )
        why = "its scales are per channel or per tensor, in kv_scale"
        unset("scales", self.scales, ScalePlace.INLINE, f"for format {name!r} ({why})")
        why = "its per-channel scales multiply Q's channels before any rotation could mix them"
        unset("rotation", self.rotation, 0, f"for format {name!r} ({why})")

    def _check_kivi(self) -> None:
        """KIVI's layout as ``kivi_flush`` writes it (:class:`kvdsl.kernels.kivi.KiviConfig`'s
        rules), its scales its own."""
        name, group = self.format_name, self.kivi_group
        require_groups(self.kivi_bits, group, self.head_dim, "kivi_group", f" for format {name!r}")
        if self.cache is CacheLayout.PAGED:
            require_whole_groups(self.page_size, group, "kivi_group")
        own = f"for format {name!r} (KIVI's own layout)"
        unset("scales", self.scales, ScalePlace.INLINE, own)
        unset("page_layout", self.page_layout, PageLayout.NHD, own)
        unset("pool", self.pool, Pool.SEPARATE, own)
        unset("rotation", self.rotation, 0, f"for format {name!r} (its K scales are per channel)")

    def check_schedule(self) -> None:
        lanes = self.head_dim // self.unit
        require(
            self.workgroup_size % lanes == 0,
            "workgroup_size",
            self.workgroup_size,
            f"a multiple of head_dim / {self.unit} ({lanes}): whole output rows per key group",
        )
        require(
            self.max_chunk >= max(self.workgroup_size, self.head_dim),
            "workgroup_size",
            self.workgroup_size,
            "small enough to leave workgroup memory for a chunk of as many keys as it has"
            " invocations (and as head_dim)",
        )

    def default_workgroup_size(self) -> int:
        return max(128, self.head_dim // 4)

    @property
    def format_name(self) -> str | None:
        """The format's name (None: an f32 or f16 cache)."""
        return None if self.format is None else self.format.value

    @property
    def template_bits(self) -> int | None:
        """8 or 4 for the template's int8 or int4 cache, else None."""
        return TEMPLATE_BITS.get(self.format_name or "")

    @property
    def kivi_bits(self) -> int | None:
        """2 or 4 for KIVI's cache, else None."""
        return KIVI_BITS.get(self.format_name or "")

    @property
    def fmt(self) -> Format | None:
        """The cache's format of :mod:`kvdsl.nodes.formats` (None: f32, f16, the template's or
        KIVI's)."""
        if self.format is None or self.template_bits is not None or self.kivi_bits is not None:
            return None
        return format_of(self.format)

    @property
    def side_words(self) -> int:
        """A row's f32 scale words in the side binding, K's then V's (0 inline)."""
        fmt = self.fmt
        return 0 if fmt is None else 2 * fmt.side_words(self.inline)

    @property
    def unit(self) -> int:
        """Cache values an invocation of the value step takes of a row (and, but for a format's
        rows, per load): eight halves as :data:`~kvdsl.nodes.words.WORDS` (16 bytes) for an
        f16 cache whose rows divide by 8, eight values of a format of 4 bits or fewer or of the
        template's int4 (four u32 words) where they do, else four (a vec4, four halves, four
        i32 of the template's int8 or two words of its int4)."""
        if self.head_dim % 8:
            return 4
        if self.format is None:
            return 8 if self.cache_type is Element.F16 else 4
        bits = self.template_bits or self.kivi_bits or self.fmt.bits
        return 8 if bits <= 4 else 4

    @property
    def row_units(self) -> int:
        """The binding units of one cache row: units of :attr:`unit` values, or a format's
        u32 words."""
        fmt = self.fmt
        return (
            self.head_dim // self.unit if fmt is None else fmt.row_words(self.head_dim, self.inline)
        )

    @property
    def storage_buffers(self) -> int:
        """The storage bindings of the ``attend`` kernel: ``seqlens_k``, ``query``, the cache's
        (and its scales'), ``sinks``, ``output`` and ``partials``."""
        if self.kivi_bits is not None:  # the residuals, and the groups (or page_table, pool)
            return 4 + (3 if self.cache is CacheLayout.BNSH else 4) + self.sinks
        if self.cache is CacheLayout.BNSH:
            cache = 2
        else:
            cache = 1 + (1 if self.pool is Pool.COMBINED else 2)
        scales = self.side_words > 0 or self.template_bits is not None
        return 4 + cache + scales + self.sinks

    @property
    def group(self) -> int:
        """Query heads per KV head."""
        return self.q_heads // self.kv_heads

    @property
    def rows(self) -> int:
        """Query rows a workgroup holds (a row block): at most :data:`MAX_ROWS`, and few
        enough that a chunk of ``max(workgroup_size, head_dim)`` keys fits beside them."""
        rows = min(self.group * self.max_queries, MAX_ROWS)
        while rows > 1 and self._chunk_room(rows) < max(self.workgroup_size, self.head_dim):
            rows -= 1
        return rows

    @property
    def max_chunk(self) -> int:
        """The most keys one workgroup reads: its logits fill the workgroup memory the block's
        queries, the invocations' partial maxima and sums and the rows' statistics leave
        (beside each key's row base, in a paged cache)."""
        return self._chunk_room(self.rows)

    def _chunk_room(self, rows: int) -> int:
        """The most keys whose logits (and row bases, paged) fit beside the block's queries,
        partial maxima and sums and statistics, each ``var<workgroup>`` rounded up to 16
        bytes as WebGPU counts it (:func:`kvdsl.ir.features.limits`)."""

        def r16(n: int) -> int:
            return -(-n // 16) * 16

        left = WORKGROUP_BYTES - r16(4 * rows * self.head_dim)
        left -= r16(4 * rows * self.workgroup_size) + r16(8 * rows)
        paged = self.cache is CacheLayout.PAGED
        most = left // (4 * rows + 4 * paged)
        while most > 0 and r16(4 * rows * most) + (r16(4 * most) if paged else 0) > left:
            most -= 1
        return most


@dataclass(frozen=True)
class AttendMergeConfig(AttendConfig):
    """The merge (:func:`kvdsl.kernels.attend.attend_merge`) of the partials of the ``attend``
    kernel of the same fields: it reads their query heads, head dim, sinks and output."""

    mode = "attend_merge"


#: The fields the merge kernel reads; its variant keeps them and defaults the others.
MERGE_FIELDS = ("head_dim", "q_heads", "sinks", "o_layout", "o_type", "workgroup_size", "fold")


def merge_config(cfg: AttendConfig) -> AttendMergeConfig:
    """The merge variant's config for ``attend`` config ``cfg``: its :data:`MERGE_FIELDS`, with
    ``kv_heads`` 1 (any divisor of ``q_heads`` builds the same merge) and the rest default."""
    keep = {f.name: getattr(cfg, f.name) for f in fields(cfg) if f.name in MERGE_FIELDS}
    return AttendMergeConfig(kv_heads=1, **keep)


def row_blocks(cfg: AttendConfig) -> str | None:
    """The ``rowBlocks`` param, ``ceil(GROUP × queries / ROWS)`` over ``queries`` 1 ..
    ``max_queries``, as a formula of ``queries`` (``a * queries + b``) for the host contract;
    None where it is no such line (the contract then makes it a shape variable)."""
    want = [-(-(cfg.group * q) // cfg.rows) for q in range(1, cfg.max_queries + 1)]
    a = want[1] - want[0] if len(want) > 1 else 0
    b = want[0] - a
    if any(v != a * q + b for q, v in enumerate(want, 1)):
        return None
    text = "" if a == 0 else "queries" if a == 1 else f"{a} * queries"
    if not text:
        return str(b)
    return text + (f" + {b}" if b > 0 else f" - {-b}" if b < 0 else "")
