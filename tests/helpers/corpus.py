"""The corpus of kernels written as production WebGPU runtimes write them
(``tests/frontend/corpus/*.wgsl``): for each, random inputs, the dispatch, and a numpy statement
of what it computes. ``tests/frontend/test_corpus.py`` runs each with ``kvdsl run --backend
both`` against it; ``benchmarks/interp_corpus.py`` times the interpreter against it."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Callable

import numpy as np

from kvdsl.reference import formats
from tests.helpers.paths import ROOT

CORPUS = ROOT / "tests" / "frontend" / "corpus"
F32 = np.float32


@dataclass
class Case:
    """A corpus kernel: ``make(rng)`` gives (buffers, params, workgroups); ``expect(buffers,
    params)`` the read_write buffers numpy says it leaves; outputs are compared within ``tol``
    relative to (1 + |numpy's|) (0: bit for bit). It runs ``file`` (the name where none), its
    overrides given ``constants`` (as ``kvdsl run --constants`` gives them)."""

    name: str
    make: Callable[[np.random.Generator], tuple[dict, dict, tuple[int, int, int]]]
    expect: Callable[[dict, dict], dict]
    tol: float = 0.0
    file: str | None = None
    constants: dict[str, int] = field(default_factory=dict)

    @property
    def path(self):
        return CORPUS / f"{self.file or self.name}.wgsl"


def _poison(n: int, dtype=np.float32) -> np.ndarray:
    if np.dtype(dtype).kind == "f":
        return np.full(n, np.nan, dtype)
    return np.full(n, 0xDEADBEEF, dtype)


def _rmsnorm(rng):
    rows, cols = 6, 300
    x = rng.standard_normal(rows * cols).astype(F32)
    w = rng.uniform(0.5, 1.5, cols).astype(F32)
    return (
        {"x": x, "weight": w, "y": _poison(rows * cols)},
        {
            "rows": rows,
            "cols": cols,
            "eps": 1e-5,
        },
        (rows, 1, 1),
    )


def _rmsnorm_np(b, p):
    x = b["x"].reshape(p["rows"], p["cols"]).astype(np.float64)
    r = x / np.sqrt(np.mean(x * x, axis=1, keepdims=True) + p["eps"]) * b["weight"]
    return {"y": r.ravel()}


def _softmax(rng):
    rows, cols = 5, 1000
    x = (rng.standard_normal(rows * cols) * 4).astype(F32)
    return {"x": x, "y": _poison(rows * cols)}, {"rows": rows, "cols": cols}, (rows, 1, 1)


def _softmax_np(b, p):
    x = b["x"].reshape(p["rows"], p["cols"]).astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return {"y": (e / e.sum(axis=1, keepdims=True)).ravel()}


def _rope(rng):
    tokens, heads, dim = 4, 3, 64
    x = rng.standard_normal(tokens * heads * dim).astype(F32)
    pos = np.array([0, 1, 2, 3], np.uint32)
    n = tokens * heads * dim // 2
    return (
        {"x": x, "positions": pos},
        {
            "tokens": tokens,
            "heads": heads,
            "dim": dim,
            "theta": 10000.0,
        },
        (-(-n // 64), 1, 1),
    )


def _rope_np(b, p):
    t, h, d = p["tokens"], p["heads"], p["dim"]
    x = b["x"].reshape(t, h, d).astype(np.float64)
    half = d // 2
    freq = p["theta"] ** (-2.0 * np.arange(half) / d)
    ang = b["positions"].astype(np.float64)[:, None, None] * freq
    a, c = x[..., :half], x[..., half:]
    out = np.concatenate([a * np.cos(ang) - c * np.sin(ang), c * np.cos(ang) + a * np.sin(ang)], -1)
    return {"x": out.ravel()}


def _head_transform(rng):
    tokens, heads, dim = 5, 3, 32
    blocks = tokens * heads * dim // 4
    q = (rng.uniform(0.5, 1.5, (blocks, 4)) * rng.choice([-1, 1], (blocks, 4))).astype(F32)
    mixing = rng.uniform(-1.0, 1.0, (heads, 16)).astype(F32)
    mixing[mixing == 0] = 0.5
    return (
        {
            "q": q,
            "mixing": mixing,
            "positions": np.array([0, 3, 7, 12, 31], np.uint32),
            "out": _poison(blocks * 4).reshape(blocks, 4),
        },
        {
            "tokens": tokens,
            "heads": heads,
            "dim": dim,
            "theta": 10000.0,
            "out_scale": [[1.5, -0.25], [0.5, 0.75]],
        },
        (-(-blocks // 64), 1, 1),
    )


def _head_transform_np(b, p):
    t, h, d = p["tokens"], p["heads"], p["dim"]
    q = b["q"].reshape(t, h, d // 4, 4).astype(np.float64)
    mats = b["mixing"].reshape(h, 4, 4).transpose(0, 2, 1).astype(np.float64)  # columns given
    x = np.einsum("hrc,thbc->thbr", mats, q)
    pos = b["positions"].astype(np.float64)[:, None, None]
    scale = np.asarray(p["out_scale"]).T
    halves = []
    for k, pair in enumerate((x[..., :2], x[..., 2:])):
        ang = pos * p["theta"] ** (-(4.0 * np.arange(d // 4) + 2 * k) / d)
        c, s = np.cos(ang), np.sin(ang)
        rot = np.stack(
            [c * pair[..., 0] - s * pair[..., 1], s * pair[..., 0] + c * pair[..., 1]], -1
        )
        halves.append(rot @ (scale if k == 0 else scale.T))
    return {"out": np.concatenate(halves, -1).reshape(-1, 4)}


def _blocks(rng, pairs: int) -> np.ndarray:
    x = (rng.standard_normal(pairs * 64) * rng.uniform(0.1, 3.0, pairs * 2).repeat(32)).astype(F32)
    x[:32] = 0.0  # a block of zeros: scale 0
    return x


def _pair_quant(rng, words: int):
    """70 pairs of blocks to quantise, each pair ``words`` words of output (q8_0: 17, q4_0: 9)."""
    pairs = 70
    return (
        {"x": _blocks(rng, pairs), "q": _poison(pairs * words, np.uint32)},
        {"pairs": pairs},
        (2, 1, 1),
    )


def _q8_quant_np(b, p):
    return {"q": formats.words(formats.quantize_q8_0(b["x"]))}


def _q4_quant_np(b, p):
    return {"q": formats.words(formats.quantize_q4_0(b["x"]))}


def _q8_dequant(rng):
    n = 32 * 37  # an odd number of blocks: the last word half used
    q = formats.words(formats.quantize_q8_0(_blocks(rng, 19)[:n]))
    return {"q": q, "y": _poison(n)}, {"n": n}, (-(-n // 64), 1, 1)


def _q8_dequant_np(b, p):
    return {"y": formats.dequantize_q8_0(formats.word_bytes(b["q"], p["n"] // 32 * 34))}


def _q8_blocks(rng):
    n = 32 * 37
    raw = formats.quantize_q8_0(_blocks(rng, 19)[:n]).reshape(-1, 34)
    # Each 34-byte block as a struct of words: the f16 scale, two bytes of padding, 32 codes.
    held = np.zeros((len(raw), 36), np.uint8)
    held[:, :2], held[:, 4:] = raw[:, :2], raw[:, 2:]
    return {"blocks": held.reshape(-1).view(np.uint32), "y": _poison(n)}, {}, (-(-n // 64), 1, 1)


def _q8_blocks_np(b, p):
    held = b["blocks"].view(np.uint8).reshape(-1, 36)
    raw = np.concatenate([held[:, :2], held[:, 4:]], axis=1)
    return {"y": formats.dequantize_q8_0(raw.reshape(-1))}


def _q4_dequant(rng):
    n = 32 * 37
    q = formats.words(formats.quantize_q4_0(_blocks(rng, 19)[:n]))
    return {"q": q, "y": _poison(n)}, {"n": n}, (-(-n // 64), 1, 1)


def _q4_dequant_np(b, p):
    return {"y": formats.dequantize_q4_0(formats.word_bytes(b["q"], p["n"] // 32 * 18))}


def _scatter(rng):
    rows, dim4, slots = 7, 20, 16
    src = rng.standard_normal(rows * dim4 * 4).astype(F32)
    order = rng.permutation(slots)[:rows].astype(np.uint32)
    cache = rng.standard_normal(slots * dim4 * 4).astype(F32)
    return {"src": src, "slots": order, "cache": cache}, {"rows": rows, "dim4": dim4}, (1, rows, 1)


def _scatter_np(b, p):
    cache = b["cache"].reshape(-1, p["dim4"] * 4).copy()
    cache[b["slots"]] = b["src"].reshape(p["rows"], -1)
    return {"cache": cache.ravel()}


def _matvec(rng):
    rows, cols = 24, 700
    w = rng.standard_normal(rows * cols).astype(F32)
    x = rng.standard_normal(cols).astype(F32)
    return {"w": w, "x": x, "y": _poison(rows)}, {"rows": rows, "cols": cols}, (rows, 1, 1)


def _matvec_np(b, p):
    w = b["w"].reshape(p["rows"], p["cols"]).astype(np.float64)
    return {"y": w @ b["x"].astype(np.float64)}


def _matvec_rows(rng):
    rows, cols = 22, 300  # a last workgroup of two rows, a last tile of 44 columns
    w = rng.standard_normal(rows * cols).astype(F32)
    x = rng.standard_normal(cols).astype(F32)
    return {"w": w, "x": x, "y": _poison(rows)}, {"rows": rows, "cols": cols}, (6, 1, 1)


HEADS, D, SEQ, CHUNK = 3, 64, 150, 64


def _flash_inputs(rng):
    q = rng.standard_normal(HEADS * D).astype(F32)
    k = rng.standard_normal(HEADS * SEQ * D).astype(F32)
    v = rng.standard_normal(HEADS * SEQ * D).astype(F32)
    return q, k, v


def _flash_partials(q, k, v, scale):
    chunks = -(-SEQ // CHUNK)
    qh = q.reshape(HEADS, D).astype(np.float64)
    kh = k.reshape(HEADS, SEQ, D).astype(np.float64)
    vh = v.reshape(HEADS, SEQ, D).astype(np.float64)
    o = np.zeros((HEADS, chunks, D))
    m = np.zeros((HEADS, chunks))
    l_ = np.zeros((HEADS, chunks))
    for h in range(HEADS):
        for c in range(chunks):
            s = kh[h, c * CHUNK : (c + 1) * CHUNK] @ qh[h] * scale
            m[h, c] = s.max()
            e = np.exp(s - m[h, c])
            l_[h, c] = e.sum()
            o[h, c] = e @ vh[h, c * CHUNK : (c + 1) * CHUNK]
    return o, m, l_


def _flash_decode(rng):
    q, k, v = _flash_inputs(rng)
    chunks = -(-SEQ // CHUNK)
    n = HEADS * chunks
    bufs = {"q": q, "k_cache": k, "v_cache": v, "part_o": _poison(n * D)}
    bufs |= {"part_m": _poison(n), "part_l": _poison(n)}
    return bufs, {"seq": SEQ, "chunks": chunks, "scale": 0.125}, (chunks, HEADS, 1)


def _flash_decode_np(b, p):
    o, m, l_ = _flash_partials(b["q"], b["k_cache"], b["v_cache"], p["scale"])
    return {"part_o": o.ravel(), "part_m": m.ravel(), "part_l": l_.ravel()}


def _flash_combine(rng):
    q, k, v = _flash_inputs(rng)
    o, m, l_ = _flash_partials(q, k, v, 0.125)
    chunks = m.shape[1]
    bufs = {"part_o": o.ravel().astype(F32), "part_m": m.ravel().astype(F32)}
    bufs |= {"part_l": l_.ravel().astype(F32), "out": _poison(HEADS * D), "_qkv": (q, k, v)}
    return bufs, {"heads": HEADS, "chunks": chunks}, (-(-HEADS * D // 64), 1, 1)


def _flash_combine_np(b, p):
    q, k, v = b["_qkv"]
    s = np.einsum("hd,hsd->hs", q.reshape(HEADS, D), k.reshape(HEADS, SEQ, D)) * 0.125
    e = np.exp(s - s.max(axis=1, keepdims=True))
    att = e / e.sum(axis=1, keepdims=True)
    return {"out": np.einsum("hs,hsd->hd", att, v.reshape(HEADS, SEQ, D)).ravel()}


def _activation(rng, act: int = 0):
    n4 = 150
    g = (rng.standard_normal(n4 * 4) * 3).astype(F32)
    u = rng.standard_normal(n4 * 4).astype(F32)
    return {"gate": g, "up": u, "out": _poison(n4 * 4)}, {"n4": n4, "act": act}, (3, 1, 1)


def _activation_np(b, p):
    g = b["gate"].astype(np.float64)
    act = {
        0: g / (1 + np.exp(-g)),
        1: 0.5 * g * (1 + np.tanh(0.7978846 * (g + 0.044715 * g**3))),
    }.get(p["act"], np.maximum(g, 0))
    return {"out": act * b["up"]}


def _bits(rng):
    rows, words = 90, 13
    data = rng.integers(0, 2**32, rows * words, dtype=np.uint64).astype(np.uint32)
    data[: 3 * words] = 0  # rows of zeros: no bit found
    data[3 * words : 4 * words] = 1 << rng.integers(0, 32, words).astype(np.uint32)
    return (
        {"data": data, "stats": _poison(rows * 4, np.uint32)},
        {
            "rows": rows,
            "words": words,
            "weights": 0x7F01FF80,
        },
        (2, 1, 1),
    )


def _bits_np(b, p):
    data = b["data"].reshape(p["rows"], p["words"])
    sb = data[..., None].view(np.uint8).astype(np.int8).astype(np.int64)  # little-endian bytes
    wb = np.array([p["weights"]], np.uint32).view(np.uint8).astype(np.int8).astype(np.int64)
    dot = (sb.reshape(p["rows"], p["words"], 4) * wb).sum(axis=(1, 2))
    ones = np.array([[bin(int(w)).count("1") for w in r] for r in data]).sum(axis=1)
    top = np.array([max([int(w).bit_length() - 1 for w in r if w] or [0]) for r in data])
    low = np.array(
        [min([(int(w) & -int(w)).bit_length() - 1 for w in r if w] or [32]) for r in data]
    )
    stats = np.stack([dot.astype(np.int64) % 2**32, ones, top, low], axis=1)
    return {"stats": stats.astype(np.uint32).ravel()}


def _quantized(kind: str, x: np.ndarray) -> np.ndarray:
    """The blocks' bytes as gguf's quantiser writes them, when the ``gguf`` package is
    installed; else kvdsl's reference (the same bytes: ``tests/reference`` holds it to ggml's)."""
    try:
        from gguf import GGMLQuantizationType
        from gguf.quants import quantize
    except ImportError:
        return (formats.quantize_q8_0 if kind == "q8_0" else formats.quantize_q4_0)(x)
    qtype = GGMLQuantizationType.Q8_0 if kind == "q8_0" else GGMLQuantizationType.Q4_0
    return np.asarray(quantize(x.reshape(1, -1), qtype)).reshape(-1)


def _block_quant(rng, size: int):
    blocks = 140  # an even number: the last block ends at a word's end
    return (
        {"x": _blocks(rng, blocks // 2), "q": _poison(blocks * size // 4, np.uint32)},
        {"blocks": blocks},
        (3, 1, 1),
    )


def _q8_atomic_np(b, p):
    return {"q": formats.words(_quantized("q8_0", b["x"]))}


def _q4_atomic_np(b, p):
    return {"q": formats.words(_quantized("q4_0", b["x"]))}


def _splitk(rng):
    rows, cols, splits = 100, 300, 4
    tiles = (rows + 63) // 64
    return (
        {
            "w": rng.standard_normal(rows * cols).astype(F32),
            "x": rng.standard_normal(cols).astype(F32),
            "partial": _poison(splits * rows),
            "arrived": np.zeros(tiles, np.uint32),
            "y": _poison(rows),
        },
        {"rows": rows, "cols": cols},
        (tiles, splits, 1),
    )


def _splitk_np(b, p):
    w = b["w"].reshape(p["rows"], p["cols"]).astype(np.float64)
    splits = len(b["partial"]) // p["rows"]
    return {"y": w @ b["x"], "arrived": np.full(len(b["arrived"]), splits, np.uint32)}


def _scaled_softmax(rng):
    rows, cols = 5, 333
    return (
        {"x": rng.standard_normal(rows * cols).astype(F32), "y": _poison(rows * cols)},
        {"rows": rows, "cols": cols, "scale": 0.7},
        (rows, 1, 1),
    )


def _scaled_softmax_np(b, p):
    z = b["x"].reshape(p["rows"], p["cols"]).astype(np.float64) * np.float32(p["scale"])
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return {"y": (e / e.sum(axis=1, keepdims=True)).ravel()}


def _row_stats(rng):
    start, rows, cols = 3, 6, 200
    x = rng.standard_normal((start + rows) * cols).astype(F32)
    job = np.array([start, rows, cols, np.float32(1.0).view(np.uint32)], np.uint32)
    stats = np.array([5, 0, 0], np.uint32)  # the counters start where the host left them
    return {"job": job, "x": x, "stats": stats, "row_max": _poison(rows)}, {}, (rows, 1, 1)


def _row_stats_np(b, p):
    start, rows, cols = (int(v) for v in b["job"][:3])
    x = b["x"].reshape(-1, cols)[start : start + rows]
    top = x.max(axis=1)
    above = 5 + int((x > b["job"][3:].view(F32)[0]).sum())
    stats = np.array([above, F32(max(0.0, top.max())).view(np.uint32), rows], np.uint32)
    return {"row_max": top, "stats": stats}


def _broadcast(rng):
    a = rng.standard_normal(2 * 1 * 4 * 5).astype(F32) * F32(4)
    b = rng.standard_normal(1 * 3 * 1 * 5).astype(F32) * F32(4)
    size = 2 * 3 * 4 * 5
    params = {
        "out_shape": [[2, 3, 4, 5]],
        "strides": [[60, 20, 5, 1], [20, 0, 5, 1], [0, 5, 0, 1]],
        "affine": {"alpha": 1.25, "beta": -0.75, "clip": 1, "pad": 0},
        "size": size,
    }
    return {"a": a, "b": b, "y": _poison(size)}, params, (2, 1, 1)  # 8 invocations past it


def _broadcast_np(b, p):
    a = b["a"].reshape(2, 1, 4, 5).astype(np.float64)
    x = b["b"].reshape(1, 3, 1, 5).astype(np.float64)
    f = p["affine"]
    y = np.clip(F32(f["alpha"]) * a + F32(f["beta"]) * x, -6.0, 6.0).ravel()
    return {"y": y}


def _layer_norm(rng):
    rows, cols4 = 5, 150
    x = (rng.standard_normal((rows * cols4, 4)) * 2 + 0.5).astype(F32)
    gamma = rng.uniform(0.5, 1.5, (cols4, 4)).astype(F32)
    beta = rng.uniform(-1.0, 1.0, (cols4, 4)).astype(F32)
    bufs = {"x": x, "gamma": gamma, "beta": beta, "y": _poison(rows * cols4 * 4).reshape(-1, 4)}
    return bufs, {"rows": rows, "cols4": cols4, "eps": 1e-5}, (rows, 1, 1)


def _layer_norm_np(b, p):
    x = b["x"].reshape(p["rows"], -1).astype(np.float64)
    mean = x.mean(axis=1, keepdims=True)
    r = (x - mean) / np.sqrt(x.var(axis=1, keepdims=True) + p["eps"])
    return {"y": (r * b["gamma"].ravel() + b["beta"].ravel()).reshape(-1, 4)}


def _bins(rng):
    start, count = 5, 300
    x = rng.uniform(-3, 3, start + count + 7).astype(F32)
    params = {
        "rows": {"start": start, "count": count, "pad0": 0, "pad1": 0},
        "edges": [-1.0, 0.0, 1.5, 0.0],
        "scale": 64.0,
    }
    counters = rng.integers(0, 50, 4).astype(np.uint32)  # the host's counts so far
    totals = np.array([3, -2, 0, 7, 1], np.int32).view(np.uint32)
    return {"x": x, "counters": counters, "totals": totals}, params, (5, 1, 1)


def _bins_np(b, p):
    r = p["rows"]
    v = b["x"][r["start"] : r["start"] + r["count"]]
    e = np.array(p["edges"], F32)
    k = (v >= e[0]).astype(int) + (v >= e[1]) + (v >= e[2])
    fixed = np.rint(v * F32(p["scale"])).astype(np.int64)
    counters = b["counters"].astype(np.int64) + np.bincount(k, minlength=4)
    totals = b["totals"].view(np.int32).astype(np.int64)
    totals[:4] += np.bincount(k, weights=fixed, minlength=4).astype(np.int64)
    totals[4] += 5  # the workgroups done
    return {"counters": counters.astype(np.uint32), "totals": totals.astype(np.uint32)}


def _layernorm(rng):
    rows, cols = 5, 300
    x = (rng.standard_normal(rows * cols) * 2 + 0.5).astype(F32)
    gamma = rng.uniform(0.5, 1.5, cols).astype(F32)
    beta = rng.uniform(-0.5, 0.5, cols).astype(F32)
    shape = {"rows": rows, "cols": cols, "gamma_scale": float(rng.uniform(0.5, 2.0))}
    return (
        {"x": x, "gamma": gamma, "beta": beta, "y": _poison(rows * cols)},
        {"uniforms": shape, "epsilon": 1e-5},
        (rows + 1, 1, 1),  # one workgroup past the rows: it returns before its barriers
    )


def _layernorm_np(b, p):
    u = p["uniforms"]
    x = b["x"].reshape(u["rows"], u["cols"]).astype(np.float64)
    d = x - x.mean(axis=1, keepdims=True)
    inv = 1 / np.sqrt((d * d).mean(axis=1, keepdims=True) + p["epsilon"])
    return {"y": (d * inv * b["gamma"] * u["gamma_scale"] + b["beta"]).ravel()}


def _grid_sample(rng):
    depth, height, width, points = 3, 5, 6, 200
    volume = rng.uniform(0.5, 4.0, (depth, height, width, 4)).astype(F32)
    size = np.array([width, height, depth])
    # Points near texel centres (a quarter texel at most off), some past the edges.
    texel = rng.integers(-2, size + 2, (points, 3))
    at = (texel + 0.5 + rng.uniform(-0.25, 0.25, (points, 3))) / size
    grid = (at * 2 - 1).astype(F32).ravel()
    shape = {"output_size": points, "channels": 4}
    bufs = {"grid": grid, "input_texture": volume, "result": _poison(4 * points)}
    return bufs, {"uniforms": shape}, (-(-points // 64), 1, 1)


def _grid_sample_np(b, p):
    volume, size = b["input_texture"], np.array(b["input_texture"].shape[2::-1])
    g = b["grid"].reshape(-1, 3).astype(np.float64)
    x, y, z = np.clip(np.floor((g + 1) / 2 * size), 0, size - 1).astype(np.int64).T
    return {"result": volume[z, y, x].T.ravel()}


#: The code's width (``BITS``) of the q8_0 and q4_0 kernels' cases, and the atomic writer's file.
Q8, Q4 = {"BITS": 8}, {"BITS": 4}
ATOMIC = "q_0_quantize_atomic"

CASES = [
    Case("rmsnorm", _rmsnorm, _rmsnorm_np, 1e-5),
    Case("softmax", _softmax, _softmax_np, 1e-5),
    Case("rope", _rope, _rope_np, 1e-4),
    Case("q8_0_quantize", partial(_pair_quant, words=17), _q8_quant_np, 0, "q_0_quantize", Q8),
    Case("q8_0_dequantize", _q8_dequant, _q8_dequant_np, 0, "q_0_dequantize", Q8),
    Case("q8_0_blocks", _q8_blocks, _q8_blocks_np),
    Case("q4_0_quantize", partial(_pair_quant, words=9), _q4_quant_np, 0, "q_0_quantize", Q4),
    Case("q4_0_dequantize", _q4_dequant, _q4_dequant_np, 0, "q_0_dequantize", Q4),
    Case("row_scatter", _scatter, _scatter_np),
    Case("matvec", _matvec, _matvec_np, 1e-4, "matvec_rows", {"ROWS": 1, "TILE": 256}),
    Case("matvec_rows", _matvec_rows, _matvec_np, 1e-4),
    Case("flash_decode", _flash_decode, _flash_decode_np, 1e-4),
    Case("flash_combine", _flash_combine, _flash_combine_np, 1e-4),
    Case("activation", _activation, _activation_np, 1e-5),
    Case("activation_gelu", lambda rng: _activation(rng, 1), _activation_np, 1e-4, "activation"),
    Case("bits_histogram", _bits, _bits_np),
    Case("q8_0_quantize_atomic", partial(_block_quant, size=34), _q8_atomic_np, 0, ATOMIC, Q8),
    Case("q4_0_quantize_atomic", partial(_block_quant, size=18), _q4_atomic_np, 0, ATOMIC, Q4),
    Case("rmsnorm_subgroup", _rmsnorm, _rmsnorm_np, 1e-5),
    Case("softmax_subgroup", _softmax, _softmax_np, 1e-5),
    Case("splitk_matvec_last_merges", _splitk, _splitk_np, 1e-4),
    Case("scaled_softmax_shadowed", _scaled_softmax, _scaled_softmax_np, 1e-5),
    Case("row_stats_counters", _row_stats, _row_stats_np),
    Case("head_transform", _head_transform, _head_transform_np, 1e-4),
    Case("broadcast_affine_packed", _broadcast, _broadcast_np, 1e-6),
    Case("bin_counters", _bins, _bins_np),
    Case("layer_norm_vec4", _layer_norm, _layer_norm_np, 1e-4),
    Case("layernorm_uniforms", _layernorm, _layernorm_np, 1e-5),
    Case("grid_sample_3d", _grid_sample, _grid_sample_np),
]
BY_NAME = {c.name: c for c in CASES}


def source(case: Case) -> str:
    """The WGSL file the case runs (``activation_gelu`` runs ``activation.wgsl``)."""
    return str(case.path)
