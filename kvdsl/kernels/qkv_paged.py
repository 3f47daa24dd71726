"""``paged_qkv``: the ``qkv`` mode (:mod:`kvdsl.kernels.qkv`) appending K and V into the pages
of a paged cache (:mod:`kvdsl.nodes.paged`) instead of a buffer-sharing one.

The packed projection, the transforms (bias, Q and K RMSNorm, rotary), Q's output and the
walks (the pair walk of f32 and f16 rows, the quantiser's with a dense ``format``) are
``qkv``'s; only each token's :class:`~kvdsl.kernels.qkv_frame.Place` differs, given here
(:class:`PagedTarget`) through ``paged_append``'s addressing (the nodes of
:mod:`kvdsl.nodes.paged`: ``slot_address``, ``table_step``, ``table_address``,
``Pages.row_base``) and its pool bindings (:func:`kvdsl.kernels.paged.pool_bindings`, side
scales in ``scale_pages``):

- ``slot_mapping`` (vLLM's ``reshape_and_cache_flash``): token ``b * keySeq + t`` goes to
  ``slot_mapping[token]`` (negative: its K and V are skipped; Q is still written) and rotates at
  ``token_positions[token]`` (vLLM's ``positions``);
- ``page_table``: sequence ``b`` holds ``seqlens_k[b] + 1`` tokens after the step, the last
  ``fresh = min(keySeq, seqlens_k[b] + 1)`` of them new: token ``t`` sits at position
  ``total - fresh + t``, which is where it rotates; tokens ``t >= fresh`` (right padding) and
  tokens of a negative page id write no K or V (their page is looked up at the last fresh
  position, so that every load stays in the table).

Bindings, in order: ``qkv``; ``slot_mapping`` and, with rotary, ``token_positions`` (or
``seqlens_k`` and ``page_table``); ``qk_norm_weight``; ``rotary_table``; ``qkv_bias``;
``q_out``; ``key_pages`` and ``value_pages`` (or one ``kv_pages``); ``scale_pages``. A config
past WebGPU's default 8 storage buffers is refused, naming the field to change.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from typing import Any

from kvdsl.ir import KernelBuilder, Val, i32, max_, min_, u32
from kvdsl.ir.tree import Member, Name
from kvdsl.kernels.config import MAX_STORAGE_BUFFERS, ROTARY_TABLE, Walk, choice, require
from kvdsl.kernels.build import BuildConfig
from kvdsl.kernels.extents import times

from kvdsl.kernels.paged import (
    PageFields,
    PagedAppendConfig,
    PagedFormat,
    addressing_extents,
    page_fields,
    pages_named,
    pool_bindings,
    pool_extents,
    scale_binding,
    scale_pages,
)
from kvdsl.kernels.qkv_config import Chain, QkvConfig, chain_start
from kvdsl.kernels.qkv_config import bytes_moved as contiguous_bytes_moved
from kvdsl.kernels.qkv_frame import Place, Target
from kvdsl.nodes import paged
from kvdsl.nodes.paged import Addressing, Pool
from kvdsl.nodes.quantise import Quantiser, cache_binding


@dataclass(frozen=True)
class PagedQkvConfig(PageFields, QkvConfig):
    """A ``paged_qkv`` variant: a ``qkv`` config's fields and the pages' (``page_size``,
    ``page_layout``, ``pool``) and how a token finds its page (``addressing``)."""

    _: KW_ONLY
    addressing: Addressing = choice(Addressing.SLOT_MAPPING)
    mode = "paged_qkv"

    def check_fields(self) -> None:
        super().check_fields()
        self.check_pages(self.fmt)
        n = self.storage_buffers
        if n > MAX_STORAGE_BUFFERS:
            past = f"{n} storage buffers, past WebGPU's default {MAX_STORAGE_BUFFERS}"
            if not self.inline:
                require(False, "scales", self.scales.value, f"'inline' here ({past})")
            if self.format is None and self.pool is Pool.SEPARATE:
                require(False, "pool", self.pool.value, f"'combined' here ({past})")
            require(False, "bias", self.bias, f"false with a norm and rotary here ({past})")

    @property
    def storage_buffers(self) -> int:
        """The kernel's storage bindings: qkv, the addressing's, the norm weights, the rotary
        table, the bias, q_out, the pools and the side scales."""
        table = self.addressing is Addressing.PAGE_TABLE
        address = 2 if table or self.rotary else 1
        pools = 1 if self.pool is Pool.COMBINED else 2
        extra = int(self.norm) + int(self.rotary) + int(self.bias) + int(not self.inline)
        return 2 + address + pools + extra

    @property
    def pool_config(self) -> PagedAppendConfig:
        """The pools as ``paged_append`` sees them (geometry, format, scales, addressing):
        the unfused chain's append, and the source of the pool helpers' sizes."""
        fmt = PagedFormat(self.present_type.value) if self.format is None else self.fmt
        return PagedAppendConfig(
            self.kv_heads, self.head_dim, page_size=self.page_size,
            page_layout=self.page_layout, pool=self.pool, format=fmt,
            scales=self.scales, addressing=self.addressing, rotation=self.rotation,
        )  # fmt: skip


class PagedTarget(Target):
    """The pages of a ``paged_qkv`` config (:class:`~kvdsl.kernels.qkv_frame.Target`)."""

    cfg: PagedQkvConfig

    def inputs(self, kb: KernelBuilder) -> None:
        if self.cfg.addressing is Addressing.PAGE_TABLE:
            self.seqlens = kb.binding("seqlens_k", i32, "read")
            self.table = kb.binding("page_table", i32, "read")
        else:
            self.slots = kb.binding("slot_mapping", i32, "read")
            if self.cfg.rotary:
                self.positions = kb.binding("token_positions", i32, "read")

    def caches(self, kb: KernelBuilder, q: Quantiser | None) -> tuple[Any, Any, Any]:
        view = self.cfg.pool_config
        if q is None:
            k, v = pool_bindings(kb, view, "read_write")
        else:
            k, v = (cache_binding(kb, q, n) for n in ("key_pages", "value_pages"))
        return k, v, scale_binding(kb, view, "read_write")

    def params(self, kb: KernelBuilder) -> None:
        self.pages = paged.declare(kb, self.cfg.pool_config.geometry)
        if self.cfg.addressing is Addressing.PAGE_TABLE:
            self.max_pages = kb.param("maxPages")

    def place(self, kb: KernelBuilder, b: Val, t: Val, token: Val, key_seq: Val) -> Place:
        cfg, pages = self.cfg, self.pages
        if cfg.addressing is Addressing.PAGE_TABLE:
            step = paged.table_step(kb, self.seqlens, b, key_seq)
            fresh, past = step.fresh, step.past
            kb.comment("The token's position; tokens t >= fresh are right padding, skipped, their")
            kb.comment("page looked up at the last fresh position (every load stays in range).")
            pos = kb.let("pos", past + t)
            at = kb.let("tablePos", past + min_(t, max_(fresh, 1) - 1))
            addr = paged.table_address(kb, pages, self.table, b, self.max_pages, at)
            skip = kb.let("skip", (t >= fresh).lor(addr.skip))
        else:
            addr = paged.slot_address(kb, pages, self.slots, token)
            pos = None
            if cfg.rotary:
                pos = kb.let("pos", max_(self.positions[token], 0).to(u32))
            skip = kb.let("skip", addr.skip)
        sides = scale_pages(pages, cfg.pool_config)

        def base(head: Val, value: bool = False) -> Val:
            return pages.row_base(addr.page, addr.slot, head, value)

        def side(head: Val) -> Val:
            return sides.row_base(addr.page, addr.slot, head)

        return Place(pos, base, None if sides is None else side, skip)

    def extents(self, batch: Any, key_seq: Val) -> tuple[dict[str, Any], dict[str, Any]]:
        cfg, view = self.cfg, self.cfg.pool_config
        max_pages = Member(Name("params"), "maxPages")
        out, fits, positions = addressing_extents(cfg, batch, key_seq, max_pages, key_seq)
        requires: dict[str, Any] = {"keySeq >= 1": key_seq >= 1} | fits
        if cfg.rotary:
            out[ROTARY_TABLE] = times(positions, 2 * cfg.half)
        out |= pool_extents(view, pages_named(view, cfg.addressing))
        return out, requires


def bytes_moved(cfg: PagedQkvConfig) -> str:
    """``qkv``'s least bytes (:func:`kvdsl.kernels.qkv.bytes_moved`) with the addressing's
    entries read once per token: its slot and, with rotary, its position, or its page-table
    entry (one per token: the kernel reads its page's entry for each) beside ``seqlens_k``."""
    out = contiguous_bytes_moved(cfg)
    slot = cfg.addressing is Addressing.SLOT_MAPPING
    per_token = 4 * (1 + int(slot and cfg.rotary))
    head, _, rest = out.partition(" + batch * 4")
    if slot:  # no seqlens_k
        return f"{head} + batch * keySeq * {per_token}{rest}"
    return f"{head} + batch * keySeq * {per_token} + batch * 4{rest}"


def contract_fields(cfg: Any) -> dict[str, Any]:
    """The fields a ``paged_qkv`` variant's ``index.json`` entry adds: ``bytes_moved`` and the
    pages' geometry (``pages``: :func:`kvdsl.kernels.paged.page_fields`)."""
    if not isinstance(cfg, PagedQkvConfig):
        return {}
    return {"bytes_moved": bytes_moved(cfg)} | page_fields(cfg.pool_config)


def chain(cfg: PagedQkvConfig) -> Chain:
    """The configs of ``cfg``'s unfused chain (:class:`kvdsl.kernels.qkv_config.Chain`, one head per
    "batch"): the split (``transpose``), Q's ``build`` (Q RMSNorm, rotary at ``pastSeq + t``),
    K's ``build`` (K RMSNorm, rotary; None with neither), then ``paged_append`` of K and V, f32
    in and no transform of its own but the ``rotation`` (the placement through ``cfg``'s
    addressing and a dense format's quantiser) into ``cfg``'s pools."""
    rot = {"rotary": cfg.rotary, "rotary_half": cfg.rotary_half, "eps": cfg.eps, "walk": Walk.FLAT}
    split, q = chain_start(cfg, **rot)
    k = BuildConfig(1, cfg.head_dim, k_norm=cfg.k_norm, **rot) if cfg.k_norm or cfg.rotary else None
    return Chain(split, q, k, cfg.pool_config)
