"""Verification cases for the cache modes over a dense cache (``dense_retain``,
``dense_window_shift``) and the format-to-format copies (``dense_convert``).

Past caches hold random words (any bits: the modes move them untouched) and, with side scales,
random non-zero f32 scales; ``seqlens_k`` mixes every adversarial kind
(:func:`kvdsl.harness.modes.adversarial_seqlens`); new tokens' rows mix magnitudes as
:mod:`kvdsl.harness.dense`'s do. Outputs are poisoned and the rows a pass does not own must keep
the poison. Moved and zeroed words compare bit for bit; quantised rows as
:class:`kvdsl.harness.dense.DenseCase` judges them (against a GPU a code may move by one step in
a few elements).
"""

from __future__ import annotations

import numpy as np

from kvdsl.harness.cases import Case, case_generator, dtype, flat
from kvdsl.harness.dense import CACHE, DenseCase
from kvdsl.harness.modes import adversarial_seqlens
from kvdsl.kernels.dense_convert import DenseConvertConfig
from kvdsl.kernels.dense_modes import (
    PAST_SCALES,
    PRESENT_SCALES,
    DenseMoveConfig,
    DenseRetainConfig,
    DenseWindowShiftConfig,
)
from kvdsl.reference import dense_modes as dm
from kvdsl.kernels.config import ROTARY_TABLE
from kvdsl.reference.formats import DenseWritten, quantize_rows
from kvdsl.reference.judge import poison, values
from kvdsl.reference.modes import Rotary


def _past(cfg: DenseMoveConfig, rng: np.random.Generator, batch: int, cap: int):
    """Random past words ``[B, H, cap, W]`` of K and V, and side scales ``[B, H, cap, 2S]``."""
    shape = (batch, cfg.kv_heads, cap)
    k = values(rng, (*shape, cfg.row_words), np.uint32)
    v = values(rng, (*shape, cfg.row_words), np.uint32)
    side = np.abs(values(rng, (*shape, cfg.side_words), np.float32))
    return k, v, side


def _case(
    cfg: DenseMoveConfig,
    shape: dict[str, int],
    inputs: dict[str, np.ndarray],
    params: dict[str, int],
    w: DenseWritten,
) -> Case:
    """The case of ``inputs`` whose expected outputs are the rows ``w`` writes (the present's
    words, and its side scales where they are), every other element poisoned and kept."""
    expected = {"present_key": w.key, "present_value": w.value}
    if not cfg.inline:
        expected[PRESENT_SCALES] = w.scales
    bufs = dict(inputs)
    bufs |= {name: poison(a.size, a.dtype) for name, a in expected.items()}
    return DenseCase(
        shape,
        flat(bufs),
        params,
        {k: a.reshape(-1) for k, a in expected.items()},
        {k: w.mask(a).reshape(-1) for k, a in expected.items()},
        layout={name: (cfg.fmt, cfg.head_dim, cfg.inline) for name in CACHE},
    )


def _new_rows(rng: np.random.Generator, shape: tuple[int, ...], dt: np.dtype) -> np.ndarray:
    """Random non-zero BSH values, each (token, head) row scaled by 10^k, k in -2..2."""
    scale = 10.0 ** rng.integers(-2, 3, (*shape[:-1], 1))
    return (values(rng, shape, np.float32) * scale).astype(dt)


def _past_window(
    cfg: DenseMoveConfig, rng: np.random.Generator, i: int, shapes: list[tuple[int, int]]
) -> tuple[int, int, int, np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Case ``i``'s ``(batch, capacity, keySeq, seqlens_k, (past K, past V, side scales))``:
    2 or 3 batches, the capacity and keySeq of ``shapes[i % 3]``, adversarial lengths."""
    batch = 2 + i % 2
    cap, key_seq = shapes[i % 3]
    seqlens = adversarial_seqlens(rng, batch, key_seq, cap, i)
    return batch, cap, key_seq, seqlens, _past(cfg, rng, batch, cap)


def _side_inputs(cfg: DenseMoveConfig, side: np.ndarray) -> dict[str, np.ndarray]:
    return {} if cfg.inline else {PAST_SCALES: side}


@case_generator("dense_retain")
def dense_retain_case(cfg: DenseRetainConfig, rng: np.random.Generator, i: int) -> Case:
    batch, cap, key_seq, seqlens, (k, v, side) = _past_window(
        cfg, rng, i, [(24, 5), (9, 1), (12, 12)]
    )
    w = dm.dense_retain(k, v, side, seqlens, key_seq)
    inputs = {"past_k": k, "past_v": v, "seqlens_k": seqlens} | _side_inputs(cfg, side)
    params = {"count": batch * cfg.kv_heads * cap, "seq": cap, "keySeq": key_seq}
    return _case(cfg, {"batch": batch, "seq": cap, "keySeq": key_seq}, inputs, params, w)


@case_generator("dense_window_shift")
def dense_window_shift_case(cfg: DenseWindowShiftConfig, rng: np.random.Generator, i: int) -> Case:
    batch, cap, key_seq, seqlens, (k, v, side) = _past_window(
        cfg, rng, i, [(16, 5), (8, 1), (12, 12)]
    )
    h, d, region = cfg.kv_heads, cfg.head_dim, cfg.region.value
    dt = dtype(cfg.input_type.value)
    new_k = _new_rows(rng, (batch, key_seq, h, d), dt).reshape(batch, key_seq, h * d)
    new_v = _new_rows(rng, (batch, key_seq, h, d), dt).reshape(batch, key_seq, h * d)
    rot = None
    if cfg.rotary:
        positions = int(seqlens.max()) + key_seq + 1
        theta = rng.uniform(0, 2 * np.pi, (positions, cfg.half))
        rot = Rotary(np.cos(theta).astype(np.float32), np.sin(theta).astype(np.float32), cfg.half)
    fmt = cfg.fmt
    w = dm.dense_window_shift(k, v, side, new_k, new_v, seqlens, fmt, cfg.inline, region, rot)
    inputs: dict[str, np.ndarray] = {"seqlens_k": seqlens}
    if region != "append":
        inputs |= {"past_k": k, "past_v": v} | _side_inputs(cfg, side)
    if region != "shift":
        inputs |= {"src_k": new_k, "src_v": new_v}
    if rot is not None and region == "all":  # one packed table: cos, then sin per position
        inputs[ROTARY_TABLE] = rot.table(cfg.half)
    elif rot is not None:
        inputs |= {"cos_cache": rot.cos, "sin_cache": rot.sin}
    rows = key_seq if region == "append" else cap
    params = {"count": batch * h * rows, "seq": cap, "keySeq": key_seq}
    shape = {"batch": batch, "seq": cap, "keySeq": key_seq}
    if rot is not None:
        shape["positions"] = rot.cos.shape[0]
    case = _case(cfg, shape, inputs, params, w)
    if region != "shift":  # quantised: a code may move by one step against a GPU
        case.codes = {name: cfg.fmt.bits for name in CACHE}
        if not cfg.inline:
            case.tolerance = {PRESENT_SCALES: 1e-6}
    return case


@case_generator("dense_convert")
def dense_convert_case(cfg: DenseConvertConfig, rng: np.random.Generator, i: int) -> Case:
    rows = [1, int(rng.integers(2, 40)), int(rng.integers(100, 200))][i % 3]
    d, fmt = cfg.head_dim, cfg.fmt
    source = cfg.source.value if cfg.source_fmt is None else cfg.source_fmt
    x = [_new_rows(rng, (rows, d), np.float32) for _ in range(2)]
    if rows > 1:
        x[0][0] = 0  # an all-zero row: a zero scale (q4_0: a negative zero)
    src_side = None
    if cfg.source_fmt is None:
        src = [a.astype(dtype(source)) for a in x]
    else:  # a dense source: its stored rows
        stored = [quantize_rows(source, a, cfg.source_inline) for a in x]
        src = [w for w, _ in stored]
        src_side = np.concatenate([s for _, s in stored], axis=-1)
    wk, wv, side = dm.dense_convert(*src, src_side, source, cfg.source_inline, fmt, cfg.inline, d)
    bufs = {"src_k": src[0], "src_v": src[1]}
    if src_side is not None and not cfg.source_inline:
        bufs["src_scales"] = src_side
    expected = {"present_key": wk, "present_value": wv}
    if not cfg.inline:
        expected[PRESENT_SCALES] = side
    bufs |= {name: poison(a.size, a.dtype) for name, a in expected.items()}
    case = DenseCase(
        {"rows": rows},
        flat(bufs),
        {"count": rows},
        {k: a.reshape(-1) for k, a in expected.items()},
        codes={name: cfg.fmt.bits for name in CACHE},
        layout={name: (fmt, d, cfg.inline) for name in CACHE},
    )
    if not cfg.inline:
        case.tolerance = {PRESENT_SCALES: 1e-6}
    if cfg.source_fmt is not None and cfg.source_fmt.asymmetric:
        # q * scale + zero: a GPU may contract it into one fma, so a code may move against the
        # reference too.
        case.quantized = {name: cfg.fmt.bits for name in CACHE}
    return case
