"""A paged session's cache and rows: its geometry (:class:`PagedSpec`: layers, sequences, pool
pages, page size, layout, addressing, format), how its rows are stored and which programs move
them (:class:`PagedRows`, built once per geometry: :func:`paged_rows`), and the runtime's
checks of the paged inputs it passes, as session errors (:func:`check_pages`)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from kvdsl.kernels.config import Element
from kvdsl.kernels.paged import (
    PAGE_SIZES,
    Addressing,
    PagedAppendConfig,
    PagedConfig,
    PagedFormat,
    PagedReadConfig,
    PageLayout,
)
from kvdsl.kernels.paged_pages import PagedCompactConfig, PagedCopyConfig, PagedWindowConfig
from kvdsl.reference import formats as fm
from kvdsl.runtime.errors import PagedInputError
from kvdsl.runtime.paged import check_pages as runtime_check_pages
from kvdsl.session.formats import SessionError, stored_difference
from kvdsl.session.host import Program
from kvdsl.session.pages import SPARE
from kvdsl.session.run import whole

#: The formats of a paged session's rows.
PAGED_FORMATS = tuple(f.value for f in PagedFormat)
LAYOUTS = tuple(x.value for x in PageLayout)
ADDRESSING = tuple(a.value for a in Addressing)


@dataclass(frozen=True)
class PagedSpec:
    """A paged cache: ``layers`` × K and V pools of ``pages`` pages of ``page_size`` tokens ×
    ``kv_heads`` × ``head_dim``, rows stored as ``format``; ``batch`` sequences of at most
    ``max_pages`` pages each (``pages`` 0: enough for every sequence full, and
    :data:`SPARE` more)."""

    layers: int = 1
    batch: int = 2
    kv_heads: int = 2
    head_dim: int = 32
    page_size: int = 16
    max_pages: int = 4
    pages: int = 0
    layout: str = "nhd"
    addressing: str = "page_table"
    format: str = "f32"

    def __post_init__(self) -> None:
        whole("layers", self.layers, 1)
        whole("batch", self.batch, 1)
        whole("kv_heads", self.kv_heads, 1)
        whole("head_dim", self.head_dim, 4)
        whole("max_pages", self.max_pages, 1, 2**20)
        if self.page_size not in PAGE_SIZES:
            raise SessionError(
                f"page_size={self.page_size!r}: expected a power of two from 16 to 256 "
                "(tokens per page)"
            )
        least = self.batch * self.max_pages + SPARE
        if self.pages:
            whole("pages", self.pages, least, 2**24)
        for name, value, allowed in (
            ("layout", self.layout, LAYOUTS),
            ("addressing", self.addressing, ADDRESSING),
            ("format", self.format, PAGED_FORMATS),
        ):
            if value not in allowed:
                raise SessionError(f"{name}={value!r}: expected one of {', '.join(allowed)}")

    @property
    def pool_pages(self) -> int:
        """Pages of each pool."""
        return self.pages or self.batch * self.max_pages + SPARE

    @property
    def capacity(self) -> int:
        """Tokens a sequence's page table reaches."""
        return self.max_pages * self.page_size


class PagedRows:
    """How a paged session's rows are stored and which programs move them (built once per
    geometry, format and addressing: :func:`paged_rows`)."""

    def __init__(self, spec: PagedSpec) -> None:
        s = spec
        self.name = s.format
        common = dict(
            page_size=s.page_size,
            page_layout=PageLayout(s.layout),
            format=PagedFormat(s.format),
        )
        h, d = s.kv_heads, s.head_dim
        self.float = s.format in ("f32", "f16")
        # A read's q * scale + zero may be one fma (asymmetric formats).
        self.asymmetric = not self.float and fm.stat_words(s.format) == 2
        self.input = np.dtype(np.float16 if s.format == "f16" else np.float32)
        tag = f"{s.format}_{s.layout}_p{s.page_size}_{h}x{d}"
        addressing = Addressing(s.addressing)
        self.cfg: PagedConfig = PagedAppendConfig(
            h,
            d,
            addressing=addressing,
            input_type=Element("f16" if s.format == "f16" else "f32"),
            **common,
        )
        self.append = Program.variant(self.cfg, f"session_paged_append_{tag}_{addressing.value}")
        self.read = Program.variant(
            PagedReadConfig(h, d, addressing=addressing, **common),
            f"session_paged_read_{tag}_{addressing.value}",
        )
        self.copy = Program.variant(PagedCopyConfig(h, d, **common), f"session_paged_copy_{tag}")
        self.compact = Program.variant(
            PagedCompactConfig(h, d, **common), f"session_paged_compact_{tag}"
        )
        self.window = Program.variant(
            PagedWindowConfig(page_size=s.page_size), f"session_paged_window_p{s.page_size}"
        )
        self.dtype = np.dtype({"f32": np.float32, "f16": np.float16}.get(s.format, np.uint32))
        self.unit = d if self.float else fm.row_words(s.format, d, True)
        self.page_values = self.cfg.page_values

    def programs(self) -> list[Program]:
        return [self.append, self.read, self.copy, self.compact, self.window]

    def encode(self, rows: np.ndarray) -> np.ndarray:
        """Stored rows ``[..., unit]`` of new-token rows ``[..., head_dim]``."""
        if self.float:
            return np.asarray(rows).astype(self.dtype)
        rows = fm.stored_basis(self.name, np.asarray(rows, np.float32))
        return fm.quantize_rows(self.name, rows, True)[0]

    def attended(self, decoded: np.ndarray) -> np.ndarray:
        """:meth:`decode`'s rows in their own basis (a format stored rotated rotates them
        back), as attention meets them."""
        return decoded if self.float else fm.original_basis(self.name, decoded)

    def decode(self, stored: np.ndarray, head_dim: int) -> np.ndarray:
        """f32 rows ``[..., head_dim]`` of stored rows (in the basis they are stored in)."""
        if self.float:
            return np.asarray(stored, np.float32)
        with np.errstate(all="ignore"):  # a free page's noise decodes to anything
            return fm.dequantize_rows(self.name, stored, None, head_dim, True)

    def judge(self, got: np.ndarray, want: np.ndarray, exact: bool, head_dim: int) -> str:
        """'' when stored values ``got`` are ``want``'s (bit for bit where ``exact``; a dense
        code may move by one step on a GPU), else the first difference
        (:func:`~kvdsl.session.formats.stored_difference`)."""
        dense = None if self.float else self.name
        itemsize = self.dtype.itemsize
        return stored_difference(got, want, exact, itemsize, dense, head_dim, self.page_values)


@functools.lru_cache(maxsize=64)
def _rows(
    fmt: str, layout: str, page_size: int, heads: int, dim: int, addressing: str
) -> PagedRows:
    spec = PagedSpec(1, 1, heads, dim, page_size, 1, 0, layout, addressing, fmt)
    return PagedRows(spec)


def paged_rows(spec: PagedSpec) -> PagedRows:
    """The rows and programs of ``spec`` (shared by every session of its geometry)."""
    return _rows(
        spec.format, spec.layout, spec.page_size, spec.kv_heads, spec.head_dim, spec.addressing
    )


def check_pages(pages: int, page_size: int, **inputs: np.ndarray | int | None) -> None:
    """:func:`kvdsl.runtime.paged.check_pages`, the checks ``kvdsl run`` makes too, each refusal
    a :class:`SessionError` (the same line)."""
    try:
        runtime_check_pages(pages, page_size, **inputs)
    except PagedInputError as err:
        raise SessionError(str(err)) from None
