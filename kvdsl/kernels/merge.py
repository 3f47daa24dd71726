"""``merge``: past BNSH cache + new BSH K/V → present BNSH cache of ``seq = pastSeq + keySeq``.

Drop-in for the template's ``mode == "merge"`` branches: ``present[b, h, t] = past[b, h, t]`` for
``t < pastSeq`` and ``new[b, t - pastSeq, h]`` after. Bindings ``past_k``, ``past_v``, ``new_k``,
``new_v`` (read), ``present_key``, ``present_value`` (read_write); params ``count`` (present rows,
batch × kvHeads × seq), ``seq``, ``pastSeq``, ``keySeq``; ``ceil(count / WG)`` workgroups folded
at ``fold``. Walks (:mod:`kvdsl.nodes.walks`): ``flat``, one invocation per present ``vec4``,
``count * HEAD_DIM_V4`` items, and the template's ``cooperative`` (every vendor but Apple) and
``per_row`` (Apple), whose dispatch the block walk keeps.

``present_type`` is the element type of past and present; ``input_type`` that of the new K/V. The
template stores new K/V into the present cache without a conversion, so it compiles only when
both are equal; kvdsl converts.

``window`` (:class:`kvdsl.nodes.index.CacheWindow`, the flat walk): ``count`` is the window's
present rows, past and present are bound from slice ``headBase`` on, new K/V from batch
``batchBase`` on.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvdsl.ir import Buffer, Kernel, KernelBuilder, Val, f32, i32, u32, with_contract
from kvdsl.ir.types import Type
from kvdsl.kernels.config import (
    COPY_WALKS,
    CacheConfig,
    Element,
    FLOATS,
    NEW,
    PAST,
    PRESENT,
    ROTARY_TABLE,
    ROTARY_TABLES,
    Walk,
    builds,
    choice,
    require_window,
)
from kvdsl.kernels.extents import ceil_div, times

from kvdsl.kernels.rows import source_batches
from kvdsl.kernels.plan import VectorWalk
from kvdsl.nodes import walks, words
from kvdsl.nodes.index import CacheWindow, cache_window


class MovedTypes:
    """A mixin of the configs of a pass that moves past and new rows into the present cache
    (``merge``, ``merge_share``, ``window_shift``), which declare the fields: ``present_type``
    of past and present, ``input_type`` of the new K/V, the walk and ``window``."""

    present_type: Element
    input_type: Element
    walk: Walk
    window: bool

    def check_moved(self) -> None:
        """The element types, then a window's walk (the flat one)."""
        require_window(self.window, self.walk)


@dataclass(frozen=True)
class MovedRows:
    """What a pass that moves past and new rows into the present cache declares before its walk
    (:func:`moved_rows`), None where it has none: the bindings ``past`` (K's, V's), ``new``,
    ``seqlens_k``, the rotary tables ``cos`` and ``sin`` (the same ``rotary_table`` packed) and
    ``present``, whose element is ``cache``; the consts ``HEAD_DIM``, ``KV_HEADS``,
    ``KV_HIDDEN`` (with new rows), ``HALF`` (rotary) and their vector forms ``hd4``,
    ``hidden4``, ``half4``; the params and the cache window."""

    past: tuple[Buffer, Buffer] | None
    new: tuple[Buffer, Buffer] | None
    seqlens_k: Buffer | None
    cos: Buffer | None
    sin: Buffer | None
    present: tuple[Buffer, Buffer]
    cache: Type
    head_dim: Val
    heads: Val
    hidden: Val | None
    half: Val | None
    params: tuple[Val, ...]
    win: CacheWindow
    hd4: Val
    hidden4: Val | None
    half4: Val | None


def moved_rows(kb: KernelBuilder, cfg: MovedTypes, width: int, past: bool, new: bool,
               params: tuple[str, ...] = ("count", "seq", "keySeq"), seqlens: bool = True,
               rotary: bool = False, packed: bool = False) -> MovedRows:  # fmt: skip
    """Declare :class:`MovedRows` for ``cfg`` (a cache config), in this order: ``past_k``,
    ``past_v`` (``past``), ``new_k``, ``new_v`` (``new``), ``seqlens_k`` (``seqlens``), the
    rotary tables (``rotary``; one ``rotary_table``, ``packed``), ``present_key``,
    ``present_value``; the consts, the ``params`` and the cache window; ``width`` > 1 makes the
    bindings vectors."""
    cache_ty = cfg.present_type.scalar
    olds = words.bindings(kb, PAST, cache_ty, width) if past else None
    news = words.bindings(kb, NEW, cfg.input_type.scalar, width) if new else None
    seqlens_k = kb.binding("seqlens_k", i32, "read") if seqlens else None
    cos = sin = None
    if packed:
        cos = sin = words.binding(kb, ROTARY_TABLE, f32, width)
    elif rotary:
        cos, sin = words.bindings(kb, ROTARY_TABLES, f32, width)
    present = words.bindings(kb, PRESENT, cache_ty, width, "read_write")
    head_dim = kb.const("HEAD_DIM", u32, cfg.head_dim)
    heads = kb.const("KV_HEADS", u32, cfg.kv_heads)
    kb.workgroup_const("WG")
    hidden = kb.const("KV_HIDDEN", u32, cfg.hidden) if new else None
    half = kb.const("HALF", u32, cfg.half) if rotary else None
    vals = tuple(kb.param(name) for name in params)
    win = cache_window(kb, cfg.window)
    hd4 = walks.vector_const(kb, head_dim, cfg.head_dim, width)
    hidden4 = walks.vector_const(kb, hidden, cfg.hidden, width) if new else None
    half4 = walks.vector_const(kb, half, cfg.half, width) if rotary else None
    cache = words.elem(cache_ty, width)
    consts = (head_dim, heads, hidden, half, vals, win, hd4, hidden4, half4)
    return MovedRows(olds, news, seqlens_k, cos, sin, present, cache, *consts)


@dataclass(frozen=True)
class MergeConfig(MovedTypes, VectorWalk, CacheConfig):
    """A merge variant: cache shape, walk and element types."""

    walk: Walk = choice(Walk.COOPERATIVE, COPY_WALKS)
    present_type: Element = choice(Element.F32, FLOATS)
    input_type: Element = choice(Element.F32, FLOATS)
    mode = "merge"

    def check_fields(self) -> None:
        self.check_moved()


@builds(MergeConfig)
def merge(cfg: MergeConfig, name: str = "merge") -> Kernel:
    """Build the merge kernel for ``cfg``."""
    kb = KernelBuilder(name, cfg.workgroup_size)
    width = words.width(cfg.head_dim, (cfg.present_type, cfg.input_type))
    names = ("count", "seq", "pastSeq", "keySeq")
    m = moved_rows(kb, cfg, width, past=True, new=True, params=names, seqlens=False)
    (past_k, past_v), (new_k, new_v), (present_key, present_value) = m.past, m.new, m.present
    rows, seq, past_seq, key_seq = m.params
    head_dim, heads, hidden, win, hd4 = m.head_dim, m.heads, m.hidden, m.win, m.hd4
    kb.comment("present[0:pastSeq] = past (BNSH copy); present[pastSeq:seq] = new K/V (BSH).")
    plan = cfg.plan
    it = plan.vectors(kb, rows, hd4, width)
    row = win.row(kb, it.row, seq)
    t = kb.let("t", row % seq)
    etmp = kb.let("etmp", row / seq)
    hk = kb.let("hk", etmp % heads)
    b = kb.let("b", etmp / heads)
    with kb.if_(t < past_seq):
        src = kb.let("src", win.bnsh(b, hk, t, heads, past_seq, hd4) + it.d)
        present_key[it.e] = past_k[src]
        present_value[it.e] = past_v[src]
    with kb.else_():
        n_src = kb.let(
            "nSrc", (win.batch(b) * key_seq + (t - past_seq)) * m.hidden4 + hk * hd4 + it.d
        )
        present_key[it.e] = words.to(kb, m.cache, new_k[n_src])
        present_value[it.e] = words.to(kb, m.cache, new_v[n_src])
    doc = "Copy the past BNSH cache, then append new BSH K/V tokens into the present cache."
    kernel = kb.build(plan.dispatch(rows, hd4), doc)
    past = times(ceil_div(rows, heads * seq), heads, past_seq, head_dim)
    if cfg.window:
        past = times(ceil_div(rows, seq), past_seq, head_dim)
    new = times(source_batches(rows, cfg.kv_heads, seq, win), key_seq, hidden)
    present = times(rows, head_dim)
    extents = {"past_k": past, "past_v": past, "new_k": new, "new_v": new}
    extents |= {"present_key": present, "present_value": present}
    fits = "seq <= pastSeq + keySeq (the present holds the past rows, then the new tokens)"
    requires = {"seq >= 1": seq >= 1, fits: seq <= past_seq + key_seq}
    # A flat kernel's vector bindings count vectors (a no-op for scalar bindings).
    return walks.vector_extents(with_contract(kernel, extents, requires))
