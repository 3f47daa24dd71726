"""``kivi_attend``: one new token's attention over KIVI's mixed cache (:mod:`kvdsl.kernels.kivi`'s
layout): the quantised groups, then the f16 residual.

Every sequence holds ``total`` tokens (a param, the same for the batch): the first
``quantised = total - total % GROUP`` in the codes, the rest in the residual at rows ``t %
GROUP``. Query head ``h`` reads KV head ``h / (q_heads / kv_heads)``. One workgroup of
``HEAD_DIM`` invocations per (sequence, query head), not split over the keys: a block of
``HEAD_DIM`` keys at a time, each invocation first the logit of one key of the block (K decoded
channel by channel: ``code * scale + min`` of its channel's group, or the residual's f16), held
in workgroup memory, then, as channel ``c``, the block's online-softmax update of its output
channel (V decoded per token). ``output`` is the normalised f32 row ``[batch, q_heads,
HEAD_DIM]``; ``query`` f32 the same shape. Logits are ``scale · q·k``.

With ``cache="paged"`` the groups are read through the sequence's row of ``page_table`` from
the pages of ``kivi_pages`` (:mod:`kvdsl.kernels.kivi`'s paged layout; ``maxPages`` in place of
``seq``); a key whose entry is negative (a page released) is hidden and weighs 0, its V never
decoded. A sequence needs one key it sees (else the output is 0 / 0).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvdsl.ir import (
    Dispatch,
    Kernel,
    KernelBuilder,
    Op,
    Val,
    array,
    bool_,
    call,
    convert,
    f32,
    i32,
    max_,
    min_,
    select,
    u32,
    unpack2x16float,
)
from kvdsl.kernels.config import Model, contract, positive_int, require, times
from kvdsl.kernels import kivi
from kvdsl.kernels.kivi import KiviCache, KiviCacheConfig, page_parts, pool_extent

#: The logit of a key no row sees, and the running maximum before any key.
HIDDEN = -3.0e38


@dataclass(frozen=True)
class KiviAttendConfig(KiviCacheConfig):
    """Attention over a KIVI cache: ``q_heads`` a multiple of ``kv_heads``; the workgroup is
    ``head_dim`` invocations."""

    q_heads: int = 0
    mode = "kivi_attend"
    KEYS = (  # fmt: skip
        "q_heads", "kv_heads", "head_dim", "bits", "group", "cache", "page_size",
        "workgroup_size", "fold",
    )

    def check_fields(self) -> None:
        super().check_fields()
        positive_int("q_heads", self.q_heads)
        require(
            self.q_heads % self.kv_heads == 0,
            "q_heads",
            self.q_heads,
            f"a multiple of kv_heads={self.kv_heads}",
        )
        require(self.head_dim <= 256, "head_dim", self.head_dim, "at most 256 (one workgroup)")

    def check_schedule(self) -> None:
        require(
            self.workgroup_size == self.head_dim,
            "workgroup_size",
            self.workgroup_size,
            f"head_dim={self.head_dim} (an invocation per channel)",
        )

    def default_workgroup_size(self) -> int:
        return self.head_dim


def kivi_attend(cfg: KiviAttendConfig, name: str = "kivi_attend") -> Kernel:
    """Build the attention over KIVI's quantised groups and residual."""
    kb = KernelBuilder(name, cfg.workgroup_size)
    query = kb.binding("query", f32, "read")
    res_k = kb.binding("residual_k", u32, "read")
    res_v = kb.binding("residual_v", u32, "read")
    if cfg.paged:
        page_table = kb.binding("page_table", i32, "read")
        pool = kb.binding("kivi_pages", u32, "read")
    else:
        k_codes = kb.binding("k_codes", u32, "read")
        k_stats = kb.binding("k_stats", u32, "read")
        v_codes = kb.binding("v_codes", u32, "read")
        v_stats = kb.binding("v_stats", u32, "read")
    output = kb.binding("output", f32, "read_write")
    d = kb.const("HEAD_DIM", u32, cfg.head_dim)
    g = kb.const("GROUP", u32, cfg.group)
    kb.workgroup_const("WG")
    per = kb.const("PER", u32, cfg.per)
    half = kb.const("HALF_DIM", u32, cfg.head_dim // 2)
    vgroups = kb.const("V_GROUPS", u32, cfg.head_dim // cfg.group)
    kv_per_q = kb.const("Q_PER_KV", u32, cfg.q_heads // cfg.kv_heads)
    q_heads = kb.const("Q_HEADS", u32, cfg.q_heads)
    kv_heads = kb.const("KV_HEADS", u32, cfg.kv_heads)
    if cfg.paged:
        parts = page_parts(kb, cfg)
        groups_per_page = kb.const("PAGE_GROUPS", u32, cfg.page_size // cfg.group)
    mask = (1 << cfg.bits) - 1
    batch, total = kb.param("batch"), kb.param("total")
    seq = kb.param("maxPages") if cfg.paged else kb.param("seq")
    scale = kb.param("scale", f32)
    logits = kb.workgroup_var("logits", array(f32, cfg.head_dim))
    lane = kb.let("lane", kb.lid.x)
    row = kb.let("row", kb.wid.x + kb.wid.y * cfg.fold)  # (sequence, query head)
    b = kb.let("b", row / q_heads)
    slice_ = kb.let("slice", b * kv_heads + row % q_heads / kv_per_q)
    quantised = kb.let("quantised", total - total % g)

    def stat(word: Val) -> tuple[Val, Val]:
        pair = unpack2x16float(word)
        return pair.x, pair.y

    def residual(buf, t: Val, c: Val) -> Val:
        return unpack2x16float(buf[(slice_ * g + t % g) * half + c / 2])[c % 2]

    def page_of(t: Val, label: str) -> tuple[Val, Val, Val]:
        """Key ``t``'s table entry, its head's part of the page and its row in the page."""
        entry = kivi.table_entry(kb, page_table, b, seq, t / parts.size, f"{label}Entry")
        page = max_(entry, 0).to(u32)
        base = kb.let(f"{label}Base", parts.base(page, slice_ % kv_heads, kv_heads))
        return entry, base, kb.let(f"{label}In", t % parts.size)

    m = kb.var("m", f32, HIDDEN)
    total_w = kb.var("l", f32, 0.0)
    acc = kb.var("acc", f32, 0.0)
    with kb.for_range("t0", 0, total, d) as t0:
        kb.comment("1. The logit of key t0 + lane (keys past total hidden).")
        t = kb.let("t", t0 + lane)
        dot = kb.var("dot", f32, 0.0)
        if cfg.paged:
            seen = kb.var("seen", bool_, t < total)
        with kb.if_(t < quantised):
            if cfg.paged:
                kb.comment("Its page (a negative entry: no page, the key hidden).")
                entry, base, at = page_of(t, "k")
                seen.set(entry >= 0)
                word0 = kb.let("kWord", base + at / per)
                shift = kb.let("kShift", at % per * cfg.bits)
                with kb.for_range("kc", 0, d) as c:
                    code = convert(f32, pool[word0 + c * (parts.size / per)] >> shift & mask)
                    at_stat = base + parts.k_stats + c * groups_per_page + at / g
                    sk, mk = stat(pool[at_stat])
                    dot.set(query[row * d + c] * (code * sk + mk), Op.ADD)
            else:
                word0 = kb.let("kWord", slice_ * d * (seq / per) + t / per)
                shift = kb.let("kShift", t % per * cfg.bits)
                with kb.for_range("kc", 0, d) as c:
                    code = convert(f32, k_codes[word0 + c * (seq / per)] >> shift & mask)
                    sk, mk = stat(k_stats[(slice_ * d + c) * (seq / g) + t / g])
                    dot.set(query[row * d + c] * (code * sk + mk), Op.ADD)
        with kb.elif_(t < total):
            with kb.for_range("rc", 0, d) as c:
                dot.set(query[row * d + c] * residual(res_k, t, c), Op.ADD)
        logits[lane] = select(HIDDEN, dot * scale, seen if cfg.paged else t < total)
        kb.barrier()
        kb.comment("2. As channel lane: the block's online-softmax update of the output.")
        keys = kb.let("keys", min_(total - t0, d))
        top = kb.var("top", f32, m)
        with kb.for_range("j", 0, keys) as j:
            top.set(max_(top, logits[j]))
        fix = kb.let("fix", call(Op.EXP, m - top))
        total_w.set(total_w * fix)
        acc.set(acc * fix)
        m.set(top)
        with kb.for_range("jv", 0, keys) as j:
            tv = kb.let("tv", t0 + j)
            weight = call(Op.EXP, logits[j] - m)
            if cfg.paged:  # a hidden key weighs 0 (m itself may be HIDDEN yet)
                weight = select(0.0, weight, logits[j] > HIDDEN)
            p = kb.let("p", weight)
            vval = kb.var("vVal", f32, 0.0)
            with kb.if_(tv < quantised):
                if cfg.paged:
                    entry, vbase, vin = page_of(tv, "v")
                    at = kb.let("vAt", vbase + parts.v_codes + vin * (d / per) + lane / per)
                    code = convert(f32, pool[at] >> (lane % per * cfg.bits) & mask)
                    sv, mv = stat(pool[vbase + parts.v_stats + vin * vgroups + lane / g])
                    vval.set(select(0.0, code * sv + mv, entry >= 0))
                else:
                    at = kb.let("vAt", slice_ * seq + tv)
                    code = convert(
                        f32, v_codes[at * (d / per) + lane / per] >> (lane % per * cfg.bits) & mask
                    )
                    sv, mv = stat(v_stats[at * vgroups + lane / g])
                    vval.set(code * sv + mv)
            with kb.else_():
                vval.set(residual(res_v, tv, lane))
            total_w.set(p, Op.ADD)
            acc.set(p * vval, Op.ADD)
        kb.barrier()
    output[row * d + lane] = acc / total_w
    doc = (
        "KIVI attention: one new token per sequence over the quantised groups (K per channel,\n"
        "V per token) and the f16 residual; a workgroup per (sequence, query head)."
    )
    if cfg.paged:
        doc = (
            "KIVI attention, paged: one new token per sequence over the quantised groups in the\n"
            "pages its table names (a negative entry: its keys hidden) and the f16 residual; a\n"
            "workgroup per (sequence, query head)."
        )
    kernel = kb.build(Dispatch((batch * q_heads * d).node, cfg.workgroup_size, cfg.fold), doc)
    slices = times(batch, kv_heads)
    residual_words = times(slices, g, half)
    rows = {"query": times(batch, q_heads, d), "residual_k": residual_words}
    rows["residual_v"] = residual_words
    if cfg.paged:
        return contract(
            kernel,
            rows
            | {
                "page_table": times(batch, seq),
                "kivi_pages": pool_extent(cfg),
                "output": times(batch, q_heads, d),
            },
            {
                f"total <= maxPages * {cfg.page_size}": total <= seq * cfg.page_size,
                "total >= 1": total >= 1,
            },
        )
    codes = times(slices, seq, cfg.head_dim // cfg.per)
    stats = times(slices, seq, vgroups)
    return contract(
        kernel,
        rows
        | {
            "k_codes": codes,
            "k_stats": stats,
            "v_codes": codes,
            "v_stats": stats,
            "output": times(batch, q_heads, d),
        },
        {"total <= seq": total <= seq, "total >= 1": total >= 1},
    )


def catalog_variants(models: dict[str, Model]) -> dict[str, KiviAttendConfig]:
    """KIVI 2-bit attention at Llama-3.1-8B's shape (32 query heads over 8 KV heads), its
    groups contiguous or in pages of 256 tokens."""
    shape = models["llama31_8b"].shape
    v = {
        f"kivi_attend_2bit_g{group}_llama31_8b": KiviAttendConfig(**shape, q_heads=32, group=group)
        for group in (128, 64, 32)
    }
    for group in (128, 32):
        v[f"kivi_attend_2bit_g{group}_paged256_llama31_8b"] = KiviAttendConfig(
            **shape, q_heads=32, group=group, cache=KiviCache.PAGED, page_size=256
        )
    return v
