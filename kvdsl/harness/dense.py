"""Verification cases for the dense-format modes (``dense_append``, ``dense_build``,
``dense_read``).

Rows mix magnitudes (each row scaled by a power of ten from 1e-2 to 1e2) so that every scale is
exercised; ``seqlens_k`` covers right-padded first prompts, appends in the middle, a cache filled
exactly and more tokens than fit; a read's rows include an all-zero one. Outputs are poisoned;
the rows not written must keep the poison. Cache words are quantised codes packed in u32 words,
compared bit for bit, except where they may move (:class:`DenseCase`): against the GPU each code
may move by one step in a few elements (WGSL's f32 division is accurate to 2.5 ULP), and with K
RMSNorm so may K's against the reference.
"""

from __future__ import annotations

import numpy as np

from dataclasses import dataclass, field
from typing import Any, Iterator

from kvdsl.harness.cases import Arrays, Case, case_generator, dtype, flat
from kvdsl.harness.modes import adversarial_seqlens
from kvdsl.kernels.dense import DenseAppendConfig, DenseBuildConfig, DenseReadConfig
from kvdsl.reference import formats as fm
from kvdsl.reference.judge import compare, compare_rows, poison, values
from kvdsl.reference.modes import KNorm, Rotary

CACHE = ("present_key", "present_value")


@dataclass
class DenseCase(Case):
    """A case whose cache outputs (``layout``: name → (format, head dim, inline)) are rows of
    packed words. They must match bit for bit, except those named in the quantised outputs:
    there the written rows are taken apart (:func:`kvdsl.reference.judge.compare_rows`) and
    their codes may move by one step in a few elements, their scales by
    :data:`~kvdsl.reference.judge.SCALE_TOL`."""

    layout: dict[str, tuple[Any, int, bool]] = field(default_factory=dict)

    def judge_outputs(
        self, got: Arrays, want: Arrays, tolerance: dict[str, float], codes: dict[str, int]
    ) -> Iterator[tuple[str, float, str | None]]:
        plain = {k: v for k, v in want.items() if k not in self.layout}
        yield from super().judge_outputs(got, plain, tolerance, codes)
        for name, expected in want.items():
            if name not in self.layout:
                continue
            mask = self.written.get(name)
            err, problem = compare(got[name], expected, 0.0, mask)
            if problem and err != float("inf") and name in codes:
                err, problem = compare_rows(got[name], expected, mask, *self.layout[name])
            yield name, err, problem


def _rows(rng: np.random.Generator, shape: tuple[int, ...], dt: np.dtype) -> np.ndarray:
    """Random non-zero values, each row of the last axis scaled by 10^k, k in -2..2."""
    scale = 10.0 ** rng.integers(-2, 3, (*shape[:-1], 1))
    return (values(rng, shape, np.float32) * scale).astype(dt)


@case_generator("dense_append")
def dense_append_case(cfg: DenseAppendConfig, rng: np.random.Generator, i: int) -> Case:
    batch = 2 + i % 2
    cap, seq = [(20, 4), (9, 1), (12, 12)][i % 3]
    h, d = cfg.kv_heads, cfg.head_dim
    dt = dtype(cfg.input_type.value)
    new_k = _rows(rng, (batch, seq, h, d), dt).reshape(batch, seq, h * d)
    new_v = _rows(rng, (batch, seq, h, d), dt).reshape(batch, seq, h * d)
    seqlens = adversarial_seqlens(rng, batch, seq, cap, i)
    bufs = {"src_k": new_k, "src_v": new_v, "seqlens_k": seqlens}
    rot, norm = _k_inputs(cfg, rng, cap, bufs)
    w = fm.dense_append(new_k, new_v, seqlens, cap, h, cfg.fmt, cfg.inline, rot, norm, cfg.rotation)
    expected, written = written_cache(w, cfg.inline, bufs)
    shape = {"batch": batch, "seq": cap, "keySeq": seq} | _positions(rot)
    params = {"count": batch * h * seq, "keySeq": seq, "seq": cap}
    return _writer_case(cfg, shape, bufs, params, expected, written)


def _k_inputs(
    cfg: DenseAppendConfig, rng: np.random.Generator, positions: int, bufs: dict[str, np.ndarray]
) -> tuple[Rotary | None, KNorm | None]:
    """K's rotary tables (``positions`` rows of random angles) and RMSNorm weight where ``cfg``
    takes them, also put into ``bufs``."""
    rot = norm = None
    if cfg.rotary:
        theta = rng.uniform(0, 2 * np.pi, (positions, cfg.half))
        rot = Rotary(np.cos(theta).astype(np.float32), np.sin(theta).astype(np.float32), cfg.half)
        bufs |= {"cos_cache": rot.cos, "sin_cache": rot.sin}
    if cfg.k_norm:
        norm = KNorm(rng.uniform(0.5, 1.5, cfg.head_dim).astype(np.float32), cfg.eps)
        bufs["k_norm_weight"] = norm.weight
    return rot, norm


def written_cache(w: Any, inline: bool, bufs: dict[str, np.ndarray]) -> tuple[dict, dict]:
    """The cache a dense writer leaves (``w``: :func:`kvdsl.reference.formats.dense_append`'s
    rows; ``inline``: its scales inline, else in ``present_scales``) and the part of it the
    writer stores, by binding; its bindings go into ``bufs`` poisoned."""
    expected = {"present_key": w.key, "present_value": w.value}
    written = {"present_key": w.mask(w.key), "present_value": w.mask(w.value)}
    bufs |= {name: poison(w.key.size, np.uint32) for name in CACHE}
    if not inline:
        expected["present_scales"] = w.scales
        written["present_scales"] = w.mask(w.scales)
        bufs["present_scales"] = poison(w.scales.size, np.float32)
    return expected, written


def _positions(rot: Rotary | None) -> dict[str, int]:
    """The shape variable ``positions`` (the rotary tables' rows) of a rotating case."""
    return {} if rot is None else {"positions": rot.cos.shape[0]}


def _writer_case(
    cfg: DenseAppendConfig,
    shape: dict[str, int],
    bufs: dict[str, np.ndarray],
    params: dict[str, int],
    expected: dict[str, np.ndarray],
    written: dict[str, np.ndarray] | None = None,
) -> DenseCase:
    """A ``dense_append`` or ``dense_build`` case: the cache compared as packed rows of
    ``cfg``'s format, with what may move (with K RMSNorm the kernel sums the row's squares in
    another order than numpy, so K's codes and scale may move against the reference too; a side
    scale is an f32 quotient, an ulp apart where the GPU divides approximately)."""
    bits = cfg.fmt.bits
    case = DenseCase(
        shape,
        flat(bufs),
        params,
        {k: a.reshape(-1) for k, a in expected.items()},
        {k: a.reshape(-1) for k, a in (written or {}).items()},
        codes={name: bits for name in CACHE},
        layout={name: (cfg.fmt, cfg.head_dim, cfg.inline) for name in CACHE},
    )
    if cfg.k_norm:
        case.quantized = {"present_key": bits}
    if not cfg.inline:
        case.tolerance = {"present_scales": 1e-5 if cfg.k_norm else 1e-6}
    return case


@case_generator("dense_build")
def dense_build_case(cfg: DenseBuildConfig, rng: np.random.Generator, i: int) -> Case:
    batch, seq, past = 1 + i % 2, [1, 13, 40][i % 3], [0, 5, 31][i % 3]
    h, d = cfg.kv_heads, cfg.head_dim
    dt = dtype(cfg.input_type.value)
    new_k = _rows(rng, (batch, seq, h, d), dt).reshape(batch, seq, h * d)
    new_v = _rows(rng, (batch, seq, h, d), dt).reshape(batch, seq, h * d)
    bufs = {"src_k": new_k, "src_v": new_v}
    rot, norm = _k_inputs(cfg, rng, past + seq, bufs)
    wk, wv, side = fm.dense_build(
        new_k, new_v, h, cfg.fmt, cfg.inline, past, rot, norm, cfg.rotation
    )
    expected = {"present_key": wk, "present_value": wv}
    bufs |= {name: poison(wk.size, np.uint32) for name in CACHE}
    if not cfg.inline:
        expected["present_scales"] = side
        bufs["present_scales"] = poison(side.size, np.float32)
    shape = {"batch": batch, "seq": seq, "pastSeq": past} | _positions(rot)
    params = {"count": batch * h * seq, "seq": seq, "pastSeq": past}
    return _writer_case(cfg, shape, bufs, params, expected)


@case_generator("dense_read")
def dense_read_case(cfg: DenseReadConfig, rng: np.random.Generator, i: int) -> Case:
    rows = [1, int(rng.integers(2, 40)), int(rng.integers(100, 200))][i % 3]
    d, fmt = cfg.head_dim, cfg.fmt
    k, v = _rows(rng, (rows, d), np.float32), _rows(rng, (rows, d), np.float32)
    if rows > 1:
        k[0] = 0  # an all-zero row: a zero scale (q4_0: a negative zero)
    (wk, sk), (wv, sv) = fm.quantize_rows(fmt, k, cfg.inline), fm.quantize_rows(fmt, v, cfg.inline)
    bufs = {"cache_key": wk.reshape(-1), "cache_value": wv.reshape(-1)}
    if not cfg.inline:
        bufs["cache_scales"] = np.concatenate([sk, sv], axis=-1).reshape(-1)
    out = dtype(cfg.output_type.value)
    want_k = fm.dequantize_rows(fmt, wk, sk, d, cfg.inline).astype(out)
    want_v = fm.dequantize_rows(fmt, wv, sv, d, cfg.inline).astype(out)
    bufs |= {"key": poison(rows * d, out), "value": poison(rows * d, out)}
    case = Case(
        {"rows": rows},
        bufs,
        {"count": rows},
        {"key": want_k.reshape(-1), "value": want_v.reshape(-1)},
    )
    if cfg.fmt.asymmetric:
        # q * scale + zero: a GPU may contract it into one fma.
        case.tolerance = {"key": 1e-6, "value": 1e-6}
    return case
