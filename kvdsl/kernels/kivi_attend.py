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
    call,
    convert,
    f32,
    max_,
    min_,
    select,
    u32,
    unpack2x16float,
)
from kvdsl.kernels.config import Model, contract, positive_int, require, times
from kvdsl.kernels.kivi import KiviConfig

#: The logit of a key no row sees, and the running maximum before any key.
HIDDEN = -3.0e38


@dataclass(frozen=True)
class KiviAttendConfig(KiviConfig):
    """Attention over a KIVI cache: ``q_heads`` a multiple of ``kv_heads``; the workgroup is
    ``head_dim`` invocations."""

    q_heads: int = 0
    mode = "kivi_attend"
    KEYS = ("q_heads", "kv_heads", "head_dim", "bits", "group", "workgroup_size", "fold")

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
    mask = (1 << cfg.bits) - 1
    batch, total, seq = kb.param("batch"), kb.param("total"), kb.param("seq")
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

    m = kb.var("m", f32, HIDDEN)
    total_w = kb.var("l", f32, 0.0)
    acc = kb.var("acc", f32, 0.0)
    with kb.for_range("t0", 0, total, d) as t0:
        kb.comment("1. The logit of key t0 + lane (keys past total hidden).")
        t = kb.let("t", t0 + lane)
        dot = kb.var("dot", f32, 0.0)
        with kb.if_(t < quantised):
            word0 = kb.let("kWord", slice_ * d * (seq / per) + t / per)
            shift = kb.let("kShift", t % per * cfg.bits)
            with kb.for_range("kc", 0, d) as c:
                code = convert(f32, k_codes[word0 + c * (seq / per)] >> shift & mask)
                sk, mk = stat(k_stats[(slice_ * d + c) * (seq / g) + t / g])
                dot.set(query[row * d + c] * (code * sk + mk), Op.ADD)
        with kb.elif_(t < total):
            with kb.for_range("rc", 0, d) as c:
                dot.set(query[row * d + c] * residual(res_k, t, c), Op.ADD)
        logits[lane] = select(HIDDEN, dot * scale, t < total)
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
            p = kb.let("p", call(Op.EXP, logits[j] - m))
            vval = kb.var("vVal", f32, 0.0)
            with kb.if_(tv < quantised):
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
    kernel = kb.build(Dispatch((batch * q_heads * d).node, cfg.workgroup_size, cfg.fold), doc)
    slices = times(batch, kv_heads)
    residual_words = times(slices, g, half)
    codes = times(slices, seq, cfg.head_dim // cfg.per)
    stats = times(slices, seq, vgroups)
    return contract(
        kernel,
        {
            "query": times(batch, q_heads, d),
            "residual_k": residual_words,
            "residual_v": residual_words,
            "k_codes": codes,
            "k_stats": stats,
            "v_codes": codes,
            "v_stats": stats,
            "output": times(batch, q_heads, d),
        },
        {"total <= seq": total <= seq, "total >= 1": total >= 1},
    )


def catalog_variants(models: dict[str, Model]) -> dict[str, KiviAttendConfig]:
    """KIVI 2-bit attention at Llama-3.1-8B's shape (32 query heads over 8 KV heads)."""
    shape = models["llama31_8b"].shape
    return {
        f"kivi_attend_2bit_g{group}_llama31_8b": KiviAttendConfig(**shape, q_heads=32, group=group)
        for group in (128, 64, 32)
    }
