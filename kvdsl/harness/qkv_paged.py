"""Verification cases for the ``paged_qkv`` mode, and its unfused chain.

The packed projection, norm weights, biases and angles are ``qkv``'s (:func:`kvdsl.harness.qkv.
inputs`); the pages are ``paged_append``'s: page tables as an allocator leaves them (shuffled
ids, a fork's shared prefix, a released page in an append window: its tokens skipped; right
padding skipped), or a slot per token with about a fifth of the slots ``-1``. A slot-mapped
sequence's positions run on from a random start, as a serving engine's ``positions`` do. Q and
the pools start poisoned: pool rows the step does not write, and the rows of skipped tokens,
must keep the poison; Q is written for every token.
"""

from __future__ import annotations

import numpy as np

from kvdsl.harness.cases import Case, case_generator, dtype, flat
from kvdsl.harness.dense import DenseCase
from kvdsl.harness.paged import append_table, appended_pools, scattered_slots
from kvdsl.harness.qkv import TOLERANCE, Runner, inputs, split_rows
from kvdsl.kernels.build import BuildConfig, build
from kvdsl.kernels.paged import SCALE_POOL, Addressing
from kvdsl.kernels.paged_append import paged_append
from kvdsl.kernels.qkv_paged import PagedQkvConfig, chain
from kvdsl.reference import formats as fm
from kvdsl.reference import paged as ref
from kvdsl.reference.judge import poison
from kvdsl.reference.qkv import project


def _pages(cfg: PagedQkvConfig, rng: np.random.Generator, bufs: dict, key_seq: int, i: int):
    """The addressing of a case: its bindings added to ``bufs``; returns the slots and the
    positions ``[B, keySeq]``, the pool's pages and the kernel's extra params."""
    batch, p = len(bufs["seqlens_k"]), cfg.page_size
    if cfg.addressing is Addressing.PAGE_TABLE:
        cap = 3 * p + 3
        seqlens = np.minimum(bufs["seqlens_k"], cap - 1).astype(np.int32)
        table, pages, total = append_table(rng, seqlens, key_seq, p, i)
        slots, _ = ref.table_places(table, seqlens, key_seq, p)
        fresh = np.minimum(key_seq, total)
        pos = (total - fresh)[:, None] + np.arange(key_seq)
        bufs |= {"seqlens_k": seqlens, "page_table": table}
        return slots, pos, pages, {"maxPages": table.shape[1]}
    del bufs["seqlens_k"]
    slots, pages = scattered_slots(rng, batch, key_seq, p)
    pos = rng.integers(0, 2 * p, batch)[:, None] + np.arange(key_seq)
    bufs["slot_mapping"] = slots.astype(np.int32)
    if cfg.rotary:
        bufs["token_positions"] = pos.astype(np.int32)
    return slots, pos, pages, {}


@case_generator("paged_qkv")
def paged_qkv_case(cfg: PagedQkvConfig, rng: np.random.Generator, i: int) -> Case:
    batch, key_seq = 2 + i % 2, [1, 5, 13][i % 3]
    d, p = cfg.head_dim, cfg.page_size
    cap = 3 * p + 3  # rotary rows: every position a case uses
    bufs, transforms = inputs(cfg, rng, batch, key_seq, cap, i)
    slots, pos, pages, params = _pages(cfg, rng, bufs, key_seq, i)
    q, k, v = project(bufs["qkv"], pos, cfg.q_heads, cfg.kv_heads, transforms)
    qt = dtype(cfg.q_type.value)
    q = q.astype(qt)
    if cfg.q_layout.value == "bsh":
        q = q.transpose(0, 2, 1, 3)
    view = cfg.pool_config
    if cfg.rotation:
        k = ref.prepare_k(k, None, None, None, cfg.rotation)
    if view.dense is not None:  # K and V in the basis the format stores them in
        k, v = (fm.stored_basis(view.dense, np.asarray(x, np.float32)) for x in (k, v))
    k, v = (x.transpose(0, 2, 1, 3) for x in (k, v))  # [B, S, H, D]
    expected, written = appended_pools(view, k, v, slots, pages)
    bufs |= {name: poison(a.size, a.dtype) for name, a in expected.items()}
    bufs["q_out"] = poison(q.size, qt)
    expected["q_out"] = np.ascontiguousarray(q).reshape(-1)
    shape = {"batch": batch, "keySeq": key_seq, "pages": pages}
    shape |= {"maxPages": params["maxPages"]} if params else {}
    if cfg.rotary:
        shape["positions"] = cap
    tol = {"q_out": TOLERANCE[cfg.q_type.value]} if cfg.q_norm or cfg.rotary else {}
    fmt = view.dense
    pools = [n for n in expected if n not in ("q_out", SCALE_POOL)]
    if fmt is None and (cfg.k_norm or cfg.rotary):
        tol |= {n: TOLERANCE[cfg.present_type.value] for n in pools}
    flat_bufs = flat(bufs)
    run = {"count": batch * key_seq * cfg.rows, "keySeq": key_seq} | params
    if fmt is None:
        return Case(shape, flat_bufs, run, expected, written, tol)
    case = DenseCase(
        shape, flat_bufs, run, expected, written, tol,
        codes={n: fmt.bits for n in pools},
        layout={n: (fmt, d, cfg.inline) for n in pools},
    )  # fmt: skip
    if cfg.k_norm:
        case.quantized = {"key_pages": fmt.bits}
    if SCALE_POOL in expected:
        case.tolerance[SCALE_POOL] = 1e-5 if cfg.k_norm else 1e-6
    return case


def unfused(
    cfg: PagedQkvConfig, buffers: dict[str, np.ndarray], params: dict[str, int], run: Runner
) -> dict[str, np.ndarray]:
    """The outputs of a ``paged_qkv`` case (flat ``buffers``, outputs poisoned as the fused
    kernel's) computed by kvdsl's own kernels in sequence through ``run``: ``transpose`` of the
    packed projection into head-major rows (the host adds the bias in f32), per batch Q's
    ``build`` (Q RMSNorm, rotary at the batch's first position ``+ t``) and K's (K RMSNorm,
    rotary), then one ``paged_append`` of K and V (f32 in, no transform but the ``rotation``:
    the placement and a dense format's quantiser) through the case's own slot mapping or page
    table. A slot-mapped batch's positions must run on (``token_positions[b, t] =
    token_positions[b, 0] + t``, as the cases' do): ``build`` rotates at ``pastSeq + t``."""
    s, d = params["keySeq"], cfg.head_dim
    hq, hkv = cfg.q_heads, cfg.kv_heads
    batch = params["count"] // (s * cfg.rows)
    ch = chain(cfg)
    xt, tables, weights = split_rows(cfg, ch, buffers, batch, s, run)
    if cfg.addressing is Addressing.PAGE_TABLE:
        total = np.maximum(buffers["seqlens_k"].astype(np.int64), -1) + 1
        first = total - np.minimum(s, total)
    elif cfg.rotary:
        first = buffers["token_positions"].reshape(batch, s)[:, 0].astype(np.int64)
        assert (buffers["token_positions"].reshape(batch, s) == first[:, None] + np.arange(s)).all()
    else:
        first = np.zeros(batch, np.int64)
    qt = buffers["q_out"].dtype
    q = np.empty((batch, hq, s, d), qt)
    new_k = np.empty((batch, s, hkv, d), np.float32)
    new_v = np.empty((batch, s, hkv, d), np.float32)

    def step(cfg_: BuildConfig, rows_: np.ndarray, weight: np.ndarray, past: int, ty) -> np.ndarray:
        flat_rows = np.ascontiguousarray(rows_).reshape(-1)
        bufs = {"src_k": flat_rows, "src_v": flat_rows, "present_key": poison(flat_rows.size, ty)}
        bufs["present_value"] = poison(flat_rows.size, ty)
        if cfg_.k_norm:
            bufs["k_norm_weight"] = weight
        if cfg_.rotary:
            bufs |= tables
        n = len(rows_)
        got = run(build(cfg_), bufs, {"count": n * s, "seq": s, "pastSeq": int(past)})
        return got["present_key"].reshape(n, s, d)

    for b in range(batch):
        q[b] = step(ch.q, xt[b, :hq], weights[0] if cfg.q_norm else None, first[b], qt)
        kb = xt[b, hq : hq + hkv]
        if ch.k is not None:
            kb = step(ch.k, kb, weights[-1] if cfg.k_norm else None, first[b], np.float32)
        new_k[b] = kb.transpose(1, 0, 2)
        new_v[b] = xt[b, hq + hkv :].transpose(1, 0, 2)
    append = ch.append
    bufs = {n: buffers[n].copy() for n in buffers if n.endswith("pages")}
    bufs |= {"src_k": new_k.reshape(-1), "src_v": new_v.reshape(-1)}
    for n in ("seqlens_k", "page_table", "slot_mapping"):
        if n in buffers:
            bufs[n] = buffers[n]
    extra = {"maxPages": params["maxPages"]} if "maxPages" in params else {}
    got = run(paged_append(append), bufs, {"count": batch * hkv * s, "keySeq": s} | extra)
    if cfg.q_layout.value == "bsh":
        q = q.transpose(0, 2, 1, 3)
    return {"q_out": np.ascontiguousarray(q).reshape(-1)} | {
        n: got[n] for n in got if n.endswith("pages")
    }
