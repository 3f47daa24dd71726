"""Index math: the dispatch-fold flat index and the BSH / BNSH layouts.

Layouts (row-major, innermost last):
- BSH  ``[batch, token, kvHeads * headDim]``: the new K/V a model layer produces;
- BNSH ``[batch, kvHead, token, headDim]``: the present (and past) cache.

A *slice* is one ``(batch, kvHead)`` of a BNSH cache: slice ``s = b * kvHeads + h`` holds that
head's rows, contiguous. A windowed kernel (:class:`CacheWindow`) has its cache bound from slice
``headBase`` on and its BSH sources from batch ``batchBase`` on.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvdsl.ir import KernelBuilder, Val
from kvdsl.ir.builder import as_val
from kvdsl.ir.tree import Name
from kvdsl.ir.types import u32


def flat_index(
    kb: KernelBuilder,
    fold: int,
    name: str = "i",
    bound: Val | None = None,
    balanced: bool = False,
) -> Val:
    """``let i = gid.x + gid.y * fold * WG;`` and, with ``bound``, ``if (i >= bound) { return; }``.

    The template's dispatch rule puts exactly ``fold`` workgroups in x whenever y > 1, so
    ``gid.y`` carries the high part of the flat invocation index. ``balanced`` (a
    :class:`kvdsl.ir.Dispatch` with ``balanced=True``) spreads the workgroups evenly over the y
    rows instead and reads x back: ``gid.x + gid.y * nwg.x * WG``. Just past ``fold``
    workgroups the template's rule launches up to twice the workgroups needed, and the extra
    ones cost about as much as the work.
    """
    wg = workgroup_size_value(kb)
    if balanced:
        kb.comment("2D flat index: the dispatch spreads its workgroups evenly over gid.y rows")
        kb.comment("of nwg.x workgroups once they pass the per-axis fold width.")
        i = kb.let(name, kb.gid.x + kb.gid.y * kb.nwg.x * wg)
    else:
        kb.comment("2D-folded flat index: gid.y carries the high bits past the dispatch's")
        kb.comment("per-axis workgroup fold width.")
        i = kb.let(name, kb.gid.x + kb.gid.y * fold * wg)
    if bound is not None:
        with kb.if_(i >= bound):
            kb.ret()
    return i


def workgroup_flat(kb: KernelBuilder, fold: int, name: str = "wgFlat") -> Val:
    """``let wgFlat = wid.x + wid.y * fold;``: the workgroup's index in the folded dispatch."""
    return kb.let(name, kb.wid.x + kb.wid.y * fold)


def workgroup_size_value(kb: KernelBuilder) -> Val | int:
    """The kernel's workgroup size as a value: its override constant where it has one, else the
    number."""
    if kb.workgroup_size_name is not None:
        return Val(Name(kb.workgroup_size_name), u32)
    return as_val(kb.workgroup_size[0], u32)


def split_rows(
    kb: KernelBuilder, row: Val, heads: Val, seq: Val, token: str = "t"
) -> tuple[Val, Val, Val]:
    """``(b, hk, t)`` of a row of ``batch × heads × seq`` rows (BNSH order), as the template
    writes it: ``t = row % seq; tmp = row / seq; hk = tmp % heads; b = tmp / heads``; ``token``
    names ``t`` (``j`` for a new token)."""
    t = kb.let(token, row % seq)
    tmp = kb.let("tmp", row / seq)
    hk = kb.let("hk", tmp % heads)
    return kb.let("b", tmp / heads), hk, t


def bnsh(b: Val, h: Val, t: Val, heads: Val, seq: Val, head_dim: Val) -> Val:
    """The first element of row ``(b, h, t)`` in a BNSH buffer of ``seq`` rows per head."""
    return ((b * heads + h) * seq + t) * head_dim


def bsh(b: Val, t: Val, h: Val, seq: Val, hidden: Val, head_dim: Val) -> Val:
    """The first element of head ``h`` of token ``(b, t)`` in a BSH buffer."""
    return (b * seq + t) * hidden + h * head_dim


@dataclass(frozen=True)
class CacheWindow:
    """Where a kernel's bound ranges start: the whole buffers (both ``None``), or a window.

    A windowed kernel walks the rows of the window only (``params.count`` of them, from the
    window's first row) and works out each row's global ``(b, h, t)`` from ``headBase`` (the
    slice the bound cache range starts at), so that the sources it indexes by batch, head or
    position (``seqlens_k``, the rotary tables, per-channel scales) are read globally; BNSH
    cache indices are taken relative to slice ``headBase`` and BSH source indices relative to
    batch ``batchBase`` (0 where the host binds the sources whole). A window is made of whole
    slices, so every mode's row moves (``window_shift`` slides rows within a slice) stay
    inside it.
    """

    head_base: Val | None = None
    batch_base: Val | None = None

    def row(self, kb: KernelBuilder, row: Val, per_slice: Val) -> Val:
        """The global row of the window's row ``row`` (``per_slice`` rows per slice)."""
        if self.head_base is None:
            return row
        kb.comment("The window's row -> the global row: the window starts at slice headBase.")
        return kb.let("gRow", row + self.head_base * per_slice)

    def bnsh(self, b: Val, h: Val, t: Val, heads: Val, seq: Val, head_dim: Val) -> Val:
        """The first element of row ``(b, h, t)`` in the bound BNSH cache range
        (:func:`bnsh`, from slice ``headBase`` on)."""
        if self.head_base is None:
            return bnsh(b, h, t, heads, seq, head_dim)
        return ((b * heads + h - self.head_base) * seq + t) * head_dim

    def batch(self, b: Val) -> Val:
        """Batch ``b`` in the bound BSH source range (from batch ``batchBase`` on)."""
        return b if self.batch_base is None else b - self.batch_base

    def bsh(self, b: Val, t: Val, h: Val, seq: Val, hidden: Val, head_dim: Val) -> Val:
        """The first element of head ``h`` of token ``(b, t)`` in the bound BSH source range."""
        return bsh(self.batch(b), t, h, seq, hidden, head_dim)


def cache_window(kb: KernelBuilder, window: bool) -> CacheWindow:
    """The kernel's :class:`CacheWindow`: with ``window`` the params ``headBase`` and
    ``batchBase`` (declared here, after the mode's own params), else the whole buffers."""
    if not window:
        return CacheWindow()
    return CacheWindow(kb.param("headBase"), kb.param("batchBase"))
