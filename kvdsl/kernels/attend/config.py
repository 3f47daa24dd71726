"""``attend``'s config (:class:`AttendConfig`), the layouts it names and the constants its kernels
and :func:`~kvdsl.kernels.attend.plan.plan` share."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from enum import StrEnum

from kvdsl.ir import f32, vec
from kvdsl.kernels.config import (
    FLOATS,
    Element,
    KernelConfig,
    choice,
    one_of,
    positive_int,
    require,
)
from kvdsl.kernels.paged import require_page_size
from kvdsl.nodes.paged import PageGeometry, PageLayout, Pool

#: The logit of a key a query does not see (below any real logit; ``exp`` of it less the
#: row's maximum is 0 in f32).
HIDDEN = -3.0e38
#: Query rows one workgroup holds (their outputs live in each invocation's registers).
MAX_ROWS = 8
MAX_QUERIES = 8
#: The workgroups :func:`~kvdsl.kernels.attend.plan.plan` aims a dispatch at: WebGPU tells no
#: count of compute units, and this many keeps a large discrete GPU busy while leaving the merge
#: a few partials per row.
TARGET_WORKGROUPS = 1024
#: WebGPU's default workgroup memory, in bytes.
WORKGROUP_BYTES = 16384
V4 = vec(4, f32)
#: The most cache units (16 bytes each, but for f16 rows of 4k + 4 halves) an invocation loads
#: back to back before using them when it scores a key: a whole row up to head_dim 128 f32 or
#: 256 f16; a longer row takes two such runs (a register budget).
ROW_LOADS = 32
#: Keys an invocation's value loop loads back to back each trip.
VALUE_KEYS = 8
#: Chunks the merge reads back to back each trip.
MERGE_CHUNKS = 4


class CacheLayout(StrEnum):
    """Where the cache's rows live: a contiguous BNSH cache, or pages of a pool."""

    BNSH = "bnsh"
    PAGED = "paged"


class RowLayout(StrEnum):
    """The order of Q's and O's rows: ``[batch, heads, queries, D]`` or
    ``[batch, queries, heads * D]``."""

    BNSH = "bnsh"
    BSH = "bsh"


@dataclass(frozen=True)
class AttendConfig(KernelConfig):
    """Decode attention over a cache of ``kv_heads`` × ``head_dim`` rows for ``q_heads`` query
    heads and up to ``max_queries`` new tokens a sequence: the cache's layout and element type,
    Q's and O's layouts and types, and the options (a sliding window, soft-capping, sinks)."""

    kv_heads: int
    head_dim: int
    q_heads: int
    _: KW_ONLY
    max_queries: int = 1
    cache: CacheLayout = choice(CacheLayout.BNSH)
    cache_type: Element = choice(Element.F32)
    page_size: int = 16
    page_layout: PageLayout = choice(PageLayout.NHD)
    pool: Pool = choice(Pool.SEPARATE)
    q_layout: RowLayout = choice(RowLayout.BNSH)
    q_type: Element = choice(Element.F32)
    o_layout: RowLayout = choice(RowLayout.BNSH)
    o_type: Element = choice(Element.F32)
    sliding_window: bool = False
    softcap: bool = False
    sinks: bool = False
    mode = "attend"
    KEYS = (  # fmt: skip
        "kv_heads", "head_dim", "q_heads", "max_queries", "cache", "cache_type", "page_size",
        "page_layout", "pool", "q_layout", "q_type", "o_layout", "o_type", "sliding_window",
        "softcap", "sinks", "workgroup_size", "fold",
    )

    def check_fields(self) -> None:
        positive_int("kv_heads", self.kv_heads)
        positive_int("q_heads", self.q_heads)
        positive_int("head_dim", self.head_dim, 256)
        require(self.head_dim % 4 == 0, "head_dim", self.head_dim, "a multiple of 4")
        require(
            self.q_heads % self.kv_heads == 0,
            "q_heads",
            self.q_heads,
            f"a multiple of kv_heads ({self.kv_heads})",
        )
        positive_int("max_queries", self.max_queries, MAX_QUERIES)
        one_of("cache", self.cache, CacheLayout)
        one_of("cache_type", self.cache_type, FLOATS)
        require_page_size(self.page_size)
        one_of("page_layout", self.page_layout, PageLayout)
        one_of("pool", self.pool, Pool)
        for field in ("q_layout", "o_layout"):
            one_of(field, getattr(self, field), RowLayout)
        for field in ("q_type", "o_type"):
            one_of(field, getattr(self, field), FLOATS)
        require(not self.window, "window", self.window, "false for attend")

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
    def unit(self) -> int:
        """Cache values per load: eight halves as :data:`~kvdsl.nodes.words.WORDS` (16 bytes)
        for an f16 cache whose rows divide by 8, else four (a vec4, or four halves)."""
        return 8 if self.cache_type is Element.F16 and self.head_dim % 8 == 0 else 4

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
        left = WORKGROUP_BYTES - 4 * rows * (self.head_dim + self.workgroup_size + 2)
        return left // (4 * rows + 4 * (self.cache is CacheLayout.PAGED))

    @property
    def geometry(self) -> PageGeometry:
        """A paged cache's pages, in units of :attr:`unit` values."""
        return PageGeometry(
            self.page_size, self.kv_heads, self.head_dim // self.unit, self.page_layout, self.pool
        )
