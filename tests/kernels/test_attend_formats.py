"""``attend`` over quantised caches: every format (the built-ins, the template's int8 and int4, a
2-bit format defined here alone) in every layout (contiguous, paged NHD and HND, a combined
pool), its scales inline or aside, on the interpreter (a subset on the GPU) against the float64
reference (:mod:`kvdsl.reference.attention`) over the cache decoded by the reference decoders
(:mod:`kvdsl.reference.formats`, :mod:`kvdsl.reference.elementwise`).

The caches are written by kvdsl's own writers (``dense_append``, ``paged_append``,
``append_quant``, run on the interpreter) into NaN-poisoned buffers, so ``attend`` reads exactly
their bytes; the combined pool, which no writer fills with a format, holds the reference
encoders' rows. Planted bugs in the emitted WGSL (a scale word, a nibble order, a side scale's
place) each fail."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import pytest

from kvdsl import interp
from kvdsl.emit import emit
from kvdsl.frontend import parse
from kvdsl.ir import KernelBuilder, Val, f32, u32, vec
from kvdsl.kernels.attend import AttendConfig, attend, attend_merge
from kvdsl.kernels.config import ConfigError
from kvdsl.kernels.dense import DenseAppendConfig, dense_append
from kvdsl.kernels.paged import PagedAppendConfig
from kvdsl.kernels.paged_append import paged_append
from kvdsl.kernels.qkv import QkvConfig, qkv
from kvdsl.kernels.quant import AppendQuantConfig, append_quant
from kvdsl.nodes import walks
from kvdsl.nodes.formats import FORMATS, Asymmetric, Format, Symmetric
from kvdsl.reference import elementwise as ew
from kvdsl.reference import formats as fm
from kvdsl.reference.attention import attention
from kvdsl.reference.paged import pool_arrays, pool_pages
from kvdsl.runtime import run as gpu_run
from tests.helpers.attend import attend_output
from tests.helpers.decoders import assert_decodes_as_the_reference

#: As for f32 and f16 caches (tests/kernels/test_attend.py): the kernel's approximate exp over
#: values of magnitude ~1 in f32; the decoded values are the reference decoder's exactly.
TOL = 2e-5
POISON = 0x7FC00000  # a NaN as f32: a scale or value read from an unwritten word shows


@dataclass(frozen=True)
class Int2Asym(Asymmetric):
    """Two bits a code over each row's ``min .. max``: sixteen codes a word (defined here
    alone: attend reads it through the protocol, as every writer and reader does)."""

    name: str = "int2_asym"
    bits: int = 2


INT2 = Int2Asym()
KV, HQ, D = 2, 4, 32
LENGTHS = np.array([70, 37])
QUERIES = 2
CHUNK = 32


def _cfg(fmt, layout: str, scales: str = "inline", **kw) -> AttendConfig:
    paged = {} if layout == "bnsh" else {"cache": "paged", "page_layout": layout}
    return AttendConfig(KV, D, HQ, max_queries=QUERIES, format=fmt, scales=scales, **paged, **kw)


def _bsh(x: np.ndarray) -> np.ndarray:
    """BNSH ``[B, H, T, D]`` as BSH ``[B, T, H * D]``."""
    b, h, t, d = x.shape
    return np.ascontiguousarray(x.transpose(0, 2, 1, 3)).reshape(b, t, h * d)


def _poisoned(n: int, dtype=np.uint32) -> np.ndarray:
    return np.full(n, POISON, np.uint32).view(dtype)


class Case:
    """One attend dispatch pair over a cache written from random K and V, and the reference's
    answer over that cache decoded."""

    def __init__(self, cfg: AttendConfig, seed: int, per_channel: bool = True):
        rng = np.random.default_rng(seed)
        self.cfg, self.rng = cfg, rng
        b, t = len(LENGTHS), int(LENGTHS.max())
        k = (rng.standard_normal((b, KV, t, D)) * 1.5).astype(np.float32)
        v = rng.standard_normal((b, KV, t, D)).astype(np.float32)
        q = rng.standard_normal((b, HQ, QUERIES, D)).astype(np.float32)
        scale = float(np.float32(0.8 / math.sqrt(D)))
        self.buffers = {"seqlens_k": (LENGTHS - 1).astype(np.int32), "query": q.reshape(-1)}
        rows = -(-(cfg.group * QUERIES) // cfg.rows)
        self.params = dict(batch=b, queries=QUERIES, scale=scale, chunk=CHUNK, rowBlocks=rows)
        if cfg.template_bits is not None:
            k_dec, v_dec, span = self._template(k, v, per_channel)
        elif cfg.cache.value == "bnsh":
            k_dec, v_dec, span = self._contiguous(k, v)
        elif cfg.pool.value == "combined":
            k_dec, v_dec, span = self._combined(k, v)
        else:
            k_dec, v_dec, span = self._paged(k, v)
        self.params["chunks"] = chunks = -(-span // CHUNK)
        sinks = (rng.standard_normal(HQ) * 2).astype(np.float32)
        if cfg.sinks:
            self.buffers["sinks"] = sinks
        self.buffers["output"] = np.full(b * HQ * QUERIES * D, np.nan, np.float32)
        self.buffers["partials"] = np.full(b * HQ * QUERIES * chunks * (D + 4), np.nan, np.float32)
        self.want = attention(
            q, k_dec, v_dec, LENGTHS, scale=scale, sinks=sinks if cfg.sinks else None
        )

    # ---- caches ------------------------------------------------------------------------------

    def _contiguous(self, k, v):
        """``dense_append`` writes every sequence's rows at 0 .. into a cache of 5 rows more."""
        cfg, fmt = self.cfg, self.cfg.fmt
        b, _, t, _ = k.shape
        cap = t + 5
        writer = DenseAppendConfig(KV, D, format=fmt, scales=cfg.scales)
        rw, s = fmt.row_words(D, cfg.inline), fmt.side_words(cfg.inline)
        bufs = {
            "src_k": _bsh(k),
            "src_v": _bsh(v),
            "seqlens_k": self.buffers["seqlens_k"],
            "present_key": _poisoned(b * KV * cap * rw),
            "present_value": _poisoned(b * KV * cap * rw),
        }
        if s:
            bufs["present_scales"] = _poisoned(b * KV * cap * 2 * s, np.float32)
        out = interp.run(dense_append(writer), bufs, {"count": b * KV * t, "keySeq": t, "seq": cap})
        self.buffers |= {"key": out["present_key"], "value": out["present_value"]}
        self.params["seq"] = cap
        words = [out[n].reshape(b, KV, cap, rw) for n in ("present_key", "present_value")]
        side = [None, None]
        if s:
            self.buffers["scales"] = out["present_scales"]
            both = out["present_scales"].reshape(b, KV, cap, 2 * s)
            side = [both[..., :s], both[..., s:]]
        return (*(self._decode(w, sd) for w, sd in zip(words, side)), cap)

    def _table(self, b: int, t: int):
        """A page table over shuffled page ids (three spare pages)."""
        p = self.cfg.page_size
        max_pages = -(-t // p) + 1
        owned = [-(-int(n) // p) for n in LENGTHS]
        ids = self.rng.permutation(sum(owned) + 3)
        table = np.full((b, max_pages), -1, np.int32)
        at = 0
        for s, n in enumerate(owned):
            table[s, :n] = ids[at : at + n]
            at += n
        self.buffers["page_table"] = table.reshape(-1)
        self.params["maxPages"] = max_pages
        return table, len(ids), max_pages * p

    def _paged(self, k, v):
        """``paged_append`` writes every sequence's rows through the page table."""
        cfg, fmt = self.cfg, self.cfg.fmt
        b, _, t, _ = k.shape
        table, pages, span = self._table(b, t)
        writer = PagedAppendConfig(
            KV, D, page_size=cfg.page_size, page_layout=cfg.page_layout, format=fmt,
            scales=cfg.scales, addressing="page_table",
        )  # fmt: skip
        g, sides = cfg.geometry, cfg.scale_geometry
        bufs = {
            "src_k": _bsh(k),
            "src_v": _bsh(v),
            "seqlens_k": self.buffers["seqlens_k"],
            "page_table": self.buffers["page_table"],
            "key_pages": _poisoned(pages * g.stride),
            "value_pages": _poisoned(pages * g.stride),
        }
        if sides is not None:
            bufs["scale_pages"] = _poisoned(pages * sides.stride, np.float32)
        params = {"count": b * t * KV, "keySeq": t, "maxPages": self.params["maxPages"]}
        out = interp.run(paged_append(writer), bufs, params)
        pools = (out["key_pages"], out["value_pages"])
        self.buffers |= dict(zip(("key_pages", "value_pages"), pools))
        lay = cfg.page_layout.value
        kp, vp = pool_pages(pools, KV, cfg.page_size, g.row, lay, "separate")
        side = [None, None]
        if sides is not None:
            self.buffers["scale_pages"] = out["scale_pages"]
            sp, _ = pool_pages(
                (out["scale_pages"],) * 2, KV, cfg.page_size, sides.row, lay, "separate"
            )
            side = [sp[..., : sides.row // 2], sp[..., sides.row // 2 :]]
        rows = [self._gather(table, x, t) for x in (kp, vp)]
        sides_ = [None if x is None else self._gather(table, x, t) for x in side]
        return (*(self._decode(w, s) for w, s in zip(rows, sides_)), span)

    def _combined(self, k, v):
        """No writer fills a combined pool with a format: the reference encoders' rows, scattered
        over the pages."""
        cfg, fmt = self.cfg, self.cfg.fmt
        b, _, t, _ = k.shape
        table, pages, span = self._table(b, t)
        p = cfg.page_size
        stored = (fm.stored_basis(fmt, x) for x in (k, v))
        (kw, ks), (vw, vs) = (fm.quantize_rows(fmt, x, cfg.inline) for x in stored)
        rw, s = kw.shape[-1], ks.shape[-1]
        kp = np.full((pages, p, KV, rw), POISON, np.uint32)
        vp = kp.copy()
        sp = np.full((pages, p, KV, 2 * s), np.nan, np.float32)
        for seq, n in enumerate(LENGTHS):
            for pos in range(int(n)):
                page, slot = table[seq, pos // p], pos % p
                kp[page, slot], vp[page, slot] = kw[seq, :, pos], vw[seq, :, pos]
                sp[page, slot] = np.concatenate([ks[seq, :, pos], vs[seq, :, pos]], axis=-1)
        lay = cfg.page_layout.value
        (self.buffers["kv_pages"],) = pool_arrays(kp, vp, lay, "combined")
        if s:
            self.buffers["scale_pages"] = pool_arrays(sp, sp, lay, "separate")[0]
        return self._decode(kw, ks if s else None), self._decode(vw, vs if s else None), span

    def _gather(self, table, pool, t):
        """Rows ``[B, H, T, W]`` of a pool ``[pages, P, H, W]`` through the page table (rows of a
        sequence past its length: zero, never read)."""
        p = self.cfg.page_size
        out = np.zeros((len(table), KV, t, pool.shape[-1]), pool.dtype)
        for seq, n in enumerate(LENGTHS):
            for pos in range(int(n)):
                out[seq, :, pos] = pool[table[seq, pos // p], pos % p]
        return out

    def _decode(self, words, side):
        fmt = self.cfg.fmt
        rows = fm.dequantize_rows(fmt, words, side, D, self.cfg.inline)
        return fm.original_basis(fmt, rows).astype(np.float64)  # ort_q4's rows: rotated back

    def _template(self, k, v, per_channel: bool):
        """``append_quant`` writes every sequence's rows at 0 .. with the template's scales."""
        bits = self.cfg.template_bits
        b, _, t, _ = k.shape
        cap = t + 5
        writer = AppendQuantConfig(KV, D, bits)
        qmax = 2 ** (bits - 1) - 1
        n = KV * D if per_channel else 1
        # Most values inside the range, a few clamped at each end.
        k_scale = (self.rng.uniform(0.5, 0.8, n) * 3.5 / qmax).astype(np.float32)
        v_scale = (self.rng.uniform(0.5, 0.8, n) * 2.5 / qmax).astype(np.float32)
        words = D if bits == 8 else D // 2
        dtype = np.int32 if bits == 8 else np.uint32
        bufs = {
            "src_k": _bsh(k),
            "src_v": _bsh(v),
            "seqlens_k": self.buffers["seqlens_k"],
            "k_scale": k_scale,
            "v_scale": v_scale,
            "present_key": _poisoned(b * KV * cap * words, dtype),
            "present_value": _poisoned(b * KV * cap * words, dtype),
        }
        params = {"count": b * KV * t, "seq": t, "pastSeq": 0, "totalSeq": cap}
        out = interp.run(append_quant(writer), bufs, params | {"perChannel": int(per_channel)})
        self.buffers |= {"key": out["present_key"], "value": out["present_value"]}
        self.buffers["kv_scale"] = np.stack([k_scale, v_scale], axis=-1).reshape(-1)
        self.params |= {"seq": cap, "perChannel": int(per_channel)}
        decoded = []
        for name, sc in (("present_key", k_scale), ("present_value", v_scale)):
            w = out[name].reshape(b, KV, cap, words)
            q = w if bits == 8 else ew.unpack_int4(w)
            scales = ew.channel_scales(sc, KV, D, per_channel)
            decoded.append(ew.dequantize(q, scales).astype(np.float64))
        return (*decoded, cap)

    # ---- runs --------------------------------------------------------------------------------

    def run(self, backend, kernels=None) -> np.ndarray:
        got = attend_output(backend, self.cfg, self.buffers, self.params, kernels)
        return got.reshape(self.want.shape)

    def check(self, backend, kernels=None) -> None:
        got = self.run(backend, kernels)
        assert not np.isnan(got).any(), "an output element was left unwritten or read poison"
        np.testing.assert_allclose(got, self.want, rtol=TOL, atol=TOL)


BACKENDS = {"interp": interp.run, "gpu": gpu_run}
NAMED = {**FORMATS, INT2.name: INT2}


def _matrix():
    """Each format of kvdsl.nodes.formats (and the 2-bit one) in each layout; a format with
    scales has them inline in some layouts and aside in the others."""
    out = {}
    for n, (name, fmt) in enumerate(NAMED.items()):
        for m, layout in enumerate(("bnsh", "nhd", "hnd")):
            side = not fmt.ggml and (n + m) % 2 == 1
            out[f"{name}-{layout}-{'side' if side else 'inline'}"] = (name, layout, side)
    return out


MATRIX = _matrix()


@pytest.mark.parametrize("case", MATRIX)
def test_every_format_in_every_layout_on_the_interpreter(case):
    name, layout, side = MATRIX[case]
    sinks = layout == "bnsh" or not side  # 9 storage buffers: paged side scales and sinks
    cfg = _cfg(NAMED[name], layout, "side" if side else "inline", sinks=sinks)
    Case(cfg, seed=len(case)).check(interp.run)


COMBINED = {
    "int4_asym-side": ("int4_asym", "side"),
    "q4_0-inline": ("q4_0", "inline"),
    "ort_q4-inline": ("ort_q4", "inline"),
}


@pytest.mark.parametrize("case", COMBINED)
def test_a_combined_pool(case):
    name, scales = COMBINED[case]
    cfg = _cfg(name, "hnd", scales, pool="combined", sinks=True)
    Case(cfg, seed=3).check(interp.run)


@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("per_channel", [True, False])
def test_the_templates_cache(bits, per_channel):
    cfg = _cfg(f"template_int{bits}", "bnsh", sinks=True)
    Case(cfg, seed=bits, per_channel=per_channel).check(interp.run)


GPU = [
    ("int8", "nhd", "inline", {}),
    ("q4_0", "bnsh", "inline", {"sinks": True}),
    ("int4", "hnd", "side", {}),
    (INT2.name, "bnsh", "side", {}),
    ("template_int4", "bnsh", "inline", {"sinks": True}),
    ("ort_q4", "hnd", "inline", {"sinks": True}),
]


@pytest.mark.parametrize("name,layout,scales,kw", GPU, ids=[f"{g[0]}-{g[1]}" for g in GPU])
def test_formats_on_the_gpu(gpu, name, layout, scales, kw):
    cfg = _cfg(NAMED.get(name, name), layout, scales, **kw)
    Case(cfg, seed=11).check(gpu_run)


@dataclass(frozen=True)
class OffsetByElement(Symmetric):
    """A format that states only the per-element decoder: attend decodes it through
    :meth:`Format.decode4`'s own four :meth:`Format.decode` calls."""

    name: str = "int4_by_element"
    bits: int = 4
    decode4 = Format.decode4


@pytest.mark.parametrize("layout", ["bnsh", "nhd"])
def test_a_format_with_only_a_per_element_decoder(layout):
    cfg = _cfg(OffsetByElement(), layout, "side")
    Case(cfg, seed=5).check(interp.run)


PLANTED = {
    # what the bug is: (format, scales, text, replacement)
    "int4 nibbles of two elements swapped": (
        "int4",
        "inline",
        "f32(i32(kw1 & 15u) - 8i) * bitcast<f32>(kw0), f32(i32((kw1 >> 4u) & 15u) - 8i)",
        "f32(i32((kw1 >> 4u) & 15u) - 8i) * bitcast<f32>(kw0), f32(i32(kw1 & 15u) - 8i)",
    ),
    "int4_asym scale and zero point swapped": (
        "int4_asym",
        "inline",
        "* bitcast<f32>(kw0) + bitcast<f32>(kw1)",
        "* bitcast<f32>(kw1) + bitcast<f32>(kw0)",
    ),
    "V's side scale read at K's": ("int8", "side", "* 2u + 1u;", "* 2u;"),
    "q4_0 low and high nibbles swapped": (
        "q4_0",
        "inline",
        "select(0u, 4u, v0E % 32u >= 16u)",
        "select(4u, 0u, v0E % 32u >= 16u)",
    ),
    "q8_0 scale from the wrong half word": (
        "q8_0",
        "inline",
        "unpack2x16float(kw0 & 65535u)",
        "unpack2x16float(kw0 >> 16u)",
    ),
    "template scales of the first KV head for every head": (
        "template_int8",
        "inline",
        "hk * 32u + e % HEAD_DIM_V4",
        "0u * 32u + e % HEAD_DIM_V4",
    ),
    "template V scale dropped": ("template_int4", "inline", "acc0_0 * vScale0", "acc0_0"),
}


@pytest.mark.parametrize("bug", PLANTED)
def test_planted_bugs_fail(bug):
    """Each bug, planted in the emitted WGSL and run through the parser and interpreter, moves
    the output away from the reference, where the kernel as emitted passes the same case."""
    name, scales, text, planted = PLANTED[bug]
    cfg = _cfg(name, "bnsh", scales)
    case = Case(cfg, seed=7)
    kernels = [attend(cfg), attend_merge(cfg)]
    case.check(interp.run, kernels)
    source = emit(kernels[0])
    assert text in source
    bad = parse(source.replace(text, planted), "attend", dispatch=kernels[0].dispatch)
    bad = replace(bad, extents=kernels[0].extents, requires=kernels[0].requires)
    with pytest.raises(AssertionError):
        case.check(interp.run, [bad, kernels[1]])


def decode4_kernel(fmt: Format, d: int, inline: bool, known: bool):
    """``out``: stored rows decoded by ``fmt.decode4`` alone, four elements a call; ``known``:
    one invocation a row, each element's place an int when the kernel is built (and each word
    loaded once, as attend's scores do), else one invocation a vec4, its place a u32 value."""
    kb = KernelBuilder("decode4", 64)
    rows = kb.binding("rows", u32, "read")
    side = None if inline else kb.binding("side", f32, "read")
    out = kb.binding("out", vec(4, f32), "read_write")
    count = kb.param("count")
    row_words = fmt.row_words(d, inline)
    it = walks.vectors(kb, 65535, count, kb.const("D4", u32, 1 if known else d // 4), 1)
    loaded: dict[int, Val] = {}

    def load(w: Val | int) -> Val:
        if isinstance(w, int) and known:
            if w not in loaded:
                loaded[w] = kb.let(f"w{w}", rows[it.row * row_words + w])
            return loaded[w]
        return rows[it.row * row_words + w]

    def stat(i: int) -> Val:
        return side[it.row * fmt.stats + i]

    if known:
        for v in range(d // 4):
            out[it.row * (d // 4) + v] = fmt.decode4(kb, f"x{v}", load, 4 * v, stat, inline)
    else:
        out[it.e] = fmt.decode4(kb, "x", load, it.d * 4, stat, inline)
    per = 1 if known else d // 4
    return kb.build(walks.dispatch(count, per, 64, 65535, blocks=False), "decode4")


DECODED = [
    (f, inline)
    for f in [*FORMATS.values(), INT2, OffsetByElement()]
    for inline in ([True] if f.ggml else [True, False])
]


@pytest.mark.parametrize("known", [True, False], ids=["int", "u32"])
@pytest.mark.parametrize("fmt,inline", DECODED, ids=lambda v: str(v))
def test_decode4_gives_the_references_values(fmt, inline, known):
    assert_decodes_as_the_reference(decode4_kernel(fmt, 64, inline, known), fmt, inline, 64)


@pytest.mark.parametrize(
    "fields,message",
    [
        (dict(format="int3"), "format='int3': expected one of 'int8', 'int4', 'int4_asym',"),
        (dict(format="int8", cache_type="f16"), "cache_type='f16': expected 'f32' (unset) with"),
        (dict(format="q4_0", scales="side"), "scales='side': expected 'inline' for q4_0"),
        (dict(scales="side"), "scales='side': expected 'inline' (unset) without a format"),
        (dict(format=INT2, head_dim=24), "head_dim=24: expected a multiple of 16"),
        (dict(format="template_int8", cache="paged"), "cache='paged': expected 'bnsh' for"),
        (dict(format="template_int4", scales="side"), "scales='side': expected 'inline' (unset)"),
        (
            dict(format="int4", scales="side", cache="paged", sinks=True),
            "scales='side': expected 'inline' with sinks in a paged cache of separate pools",
        ),
    ],
)
def test_bad_format_fields_name_the_field(fields, message):
    with pytest.raises(ConfigError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        AttendConfig(**({"kv_heads": 2, "head_dim": 32, "q_heads": 4} | fields))


@pytest.mark.parametrize("name,scales", [("int4", "side"), ("q8_0", "inline")])
def test_the_fused_qkv_then_attend(name, scales):
    """A layer's decode step as a runtime runs it: the fused ``qkv`` kernel writes a prompt's K
    and V (60 tokens) and then two new tokens' (Q to ``q_out``, K and V appended at each
    sequence's own place), and ``attend`` reads ``q_out`` and the cache as ``qkv`` left them."""
    rng = np.random.default_rng(13)
    fused = QkvConfig(KV, D, q_heads=HQ, format=name, scales=scales)
    fmt, inline = fused.fmt, fused.inline
    b, cap, rw, s = 2, 72, fmt.row_words(D, inline), fmt.side_words(inline)
    cache = {
        "present_key": _poisoned(b * KV * cap * rw),
        "present_value": _poisoned(b * KV * cap * rw),
    }
    if s:
        cache["present_scales"] = _poisoned(b * KV * cap * 2 * s, np.float32)
    kernel = qkv(fused)
    lengths = np.array([62, 41])
    for key_seq, seqlens in ((60, [59, 59]), (QUERIES, lengths - 1)):
        x = rng.standard_normal((b, key_seq, (HQ + 2 * KV) * D)).astype(np.float32)
        bufs = cache | {
            "qkv": x.reshape(-1),
            "seqlens_k": np.asarray(seqlens, np.int32),
            "q_out": np.full(b * key_seq * HQ * D, np.nan, np.float32),
        }
        params = {"count": b * key_seq * fused.heads, "keySeq": key_seq, "seq": cap}
        out = interp.run(kernel, bufs, params)
        cache = {n: out[n] for n in cache}
    cfg = _cfg(name, "bnsh", scales, sinks=True)
    sinks = rng.standard_normal(HQ).astype(np.float32)
    buffers = {
        "seqlens_k": (lengths - 1).astype(np.int32),
        "query": out["q_out"],
        "key": cache["present_key"],
        "value": cache["present_value"],
        "sinks": sinks,
        "output": np.full(b * HQ * QUERIES * D, np.nan, np.float32),
        "partials": np.full(b * HQ * QUERIES * 3 * (D + 4), np.nan, np.float32),
    }
    side = [None, None]
    if s:
        buffers["scales"] = cache["present_scales"]
        both = cache["present_scales"].reshape(b, KV, cap, 2 * s)
        side = [both[..., :s], both[..., s:]]
    scale = float(np.float32(1 / math.sqrt(D)))
    params = dict(batch=b, queries=QUERIES, scale=scale, chunk=CHUNK, chunks=3, rowBlocks=1)
    got = interp.run(attend(cfg), buffers, params | {"seq": cap})
    merged = interp.run(
        attend_merge(cfg),
        {"partials": got["partials"], "sinks": sinks, "output": buffers["output"]},
        {n: params[n] for n in ("batch", "queries", "chunks")},
    )["output"]
    k, v = (
        fm.dequantize_rows(fmt, cache[n].reshape(b, KV, cap, rw), sd, D, inline)
        for n, sd in zip(("present_key", "present_value"), side)
    )
    q = out["q_out"].reshape(b, HQ, QUERIES, D)
    want = attention(q, k, v, lengths, scale=scale, sinks=sinks)
    np.testing.assert_allclose(merged.reshape(want.shape), want, rtol=TOL, atol=TOL)
