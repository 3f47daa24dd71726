"""Verification cases for the modes that append, build and quantise.

Shapes are adversarial on purpose: ``seqlens_k`` covers right-padded first prompts
(``seqlens_k + 1 < keySeq``), appends in the middle, a cache filled exactly, more tokens than the
capacity (eviction in a window, clamping in a shared cache) and, where the mode defines it, an
empty sequence (``seqlens_k = -1``). Float outputs computed with approximate builtins or a
possible fma contraction carry a small tolerance; quantised outputs computed after such math may
move by one quantisation step in a few elements (``Case.quantized``).
"""

from __future__ import annotations

from dataclasses import dataclass
import numpy as np

from kvdsl import reference
from kvdsl.harness.cases import Case, case_generator, dtype
from kvdsl.kernels.build import BuildConfig
from kvdsl.kernels.rows import RowConfig
from kvdsl.kernels.config import Bindings
from kvdsl.kernels.merge import MergeConfig
from kvdsl.kernels.merge_share import MergeShareConfig
from kvdsl.kernels.quant import AppendQuantConfig, BuildQuantConfig, QuantConfig
from kvdsl.kernels.window_shift import WindowShiftConfig
from kvdsl.reference.judge import poison, values


def _present(prefix: str, shape: tuple, dt: np.dtype) -> dict[str, np.ndarray]:
    size = int(np.prod(shape))
    return {"present_key": poison(size, dt), "present_value": poison(size, dt)}


def _rotary(rng: np.random.Generator, positions: int, half: int) -> reference.Rotary:
    theta = rng.uniform(0, 2 * np.pi, (positions, half))
    cos, sin = np.cos(theta).astype(np.float32), np.sin(theta).astype(np.float32)
    return reference.Rotary(cos, sin, half)


def _with_positions(case: Case, rot: reference.Rotary | None) -> Case:
    """``case`` with the shape variable ``positions`` (the rotary table's rows) when it rotates."""
    if rot is not None:
        case.shape["positions"] = rot.cos.shape[0]
    return case


def _float_tol(
    cfg: MergeConfig | MergeShareConfig | WindowShiftConfig | RowConfig, transformed: bool
) -> float:
    if not transformed:
        return 0.0
    f16 = cfg.present_type == "f16"
    return 2e-3 if f16 else 2e-5


def adversarial_seqlens(
    rng: np.random.Generator, batch: int, key_seq: int, cap: int, i: int
) -> np.ndarray:
    """Per-batch ``seqlens_k`` (total valid tokens - 1) mixing every adversarial kind."""
    kinds = [
        lambda: int(rng.integers(0, key_seq)) - 1,  # right-padded first prompt (or empty)
        lambda: int(rng.integers(key_seq, cap + 1)) - 1,  # append in the middle
        lambda: cap - 1,  # fills the cache exactly
        lambda: int(rng.integers(cap, 2 * cap + 2)) - 1,  # more than the capacity
    ]
    return np.array([kinds[(i + b) % 4]() for b in range(batch)], np.int32)


def _flat(d: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {k: np.ascontiguousarray(v).reshape(-1) for k, v in d.items()}


@case_generator("merge")
def merge_case(cfg: MergeConfig, rng: np.random.Generator, i: int) -> Case:
    batch = 1 + i % 2
    past, new = [(0, 3), (17, 1), (40, 9)][i % 3]
    h, d = cfg.kv_heads, cfg.head_dim
    ct, it = dtype(cfg.present_type), dtype(cfg.input_type)
    past_k, past_v = (values(rng, (batch, h, past, d), ct) for _ in range(2))
    new_k, new_v = (values(rng, (batch, new, h * d), it) for _ in range(2))
    pk, pv = reference.merge(past_k, past_v, new_k.astype(ct), new_v.astype(ct))
    seq = past + new
    return Case(
        {"batch": batch, "pastSeq": past, "keySeq": new},
        _flat({"past_k": past_k, "past_v": past_v, "new_k": new_k, "new_v": new_v})
        | _present("", pk.shape, ct),
        {"count": batch * h * seq, "seq": seq, "pastSeq": past, "keySeq": new},
        _flat({"present_key": pk, "present_value": pv}),
    )


@dataclass(frozen=True)
class _Window:
    """A windowed case's shape: batches, cache rows per head, new tokens, element types and the
    per-batch ``seqlens_k``."""

    batch: int
    cap: int
    key_seq: int
    heads: int
    head_dim: int
    ct: np.dtype
    it: np.dtype
    seqlens: np.ndarray

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """The cache's BNSH shape."""
        return (self.batch, self.heads, self.cap, self.head_dim)

    def new(self, rng: np.random.Generator) -> np.ndarray:
        """Random new K or V (BSH) of the input type."""
        return values(rng, (self.batch, self.key_seq, self.heads * self.head_dim), self.it)

    def case(
        self, bufs: dict[str, np.ndarray], rows: int, w: reference.Written, tol: float
    ) -> Case:
        """The case of inputs ``bufs``, ``rows`` rows per batch and head dispatched, and the
        reference's window ``w``."""
        return Case(
            {"batch": self.batch, "seq": self.cap, "keySeq": self.key_seq},
            _flat(bufs) | _present("", self.shape, self.ct),
            {"count": self.batch * self.heads * rows, "seq": self.cap, "keySeq": self.key_seq},
            _flat({"present_key": w.key, "present_value": w.value}),
            _flat({"present_key": w.mask, "present_value": w.mask}),
            {"present_key": tol},
        )


def _window(
    cfg: MergeShareConfig | WindowShiftConfig,
    rng: np.random.Generator,
    i: int,
    sizes: list[tuple[int, int]],
) -> _Window:
    batch = 2 + i % 2
    cap, key_seq = sizes[i % 3]
    ct, it = dtype(cfg.present_type), dtype(cfg.input_type)
    seqlens = adversarial_seqlens(rng, batch, key_seq, cap, i)
    return _Window(batch, cap, key_seq, cfg.kv_heads, cfg.head_dim, ct, it, seqlens)


@case_generator("merge_share")
def merge_share_case(cfg: MergeShareConfig, rng: np.random.Generator, i: int) -> Case:
    win = _window(cfg, rng, i, [(24, 5), (9, 1), (40, 40)])
    bufs: dict[str, np.ndarray] = {"seqlens_k": win.seqlens}
    rot = None
    if cfg.region == "retain":
        past_k, past_v = (values(rng, win.shape, win.ct) for _ in range(2))
        w = reference.merge_share_retain(past_k, past_v, win.seqlens, win.key_seq)
        bufs |= {"past_k": past_k, "past_v": past_v}
        rows = win.cap
    else:
        new_k, new_v = (win.new(rng) for _ in range(2))
        rot = _rotary(rng, win.cap, cfg.half) if cfg.rotary else None
        k, v = new_k.astype(np.float32), new_v.astype(np.float32)
        w = reference.merge_share_append(k, v, win.seqlens, win.cap, win.heads, rot, win.ct)
        bufs |= {"new_k": new_k, "new_v": new_v}
        if rot is not None:
            bufs |= {"cos_cache": rot.cos, "sin_cache": rot.sin}
        rows = win.key_seq
    case = win.case(bufs, rows, w, _float_tol(cfg, cfg.rotary and cfg.region == "append"))
    return _with_positions(case, rot)


@case_generator("window_shift")
def window_shift_case(cfg: WindowShiftConfig, rng: np.random.Generator, i: int) -> Case:
    win = _window(cfg, rng, i, [(16, 5), (8, 1), (12, 12)])
    past_k, past_v = (values(rng, win.shape, win.ct) for _ in range(2))
    new_k, new_v = (win.new(rng) for _ in range(2))
    positions = int(win.seqlens.max()) + win.key_seq + 1
    rot = _rotary(rng, positions, cfg.half) if cfg.rotary else None
    k, v = new_k.astype(np.float32), new_v.astype(np.float32)
    w = reference.window_shift(past_k, past_v, k, v, win.seqlens, cfg.region, rot)
    bufs: dict[str, np.ndarray] = {"seqlens_k": win.seqlens}
    if cfg.region != "append":
        bufs |= {"past_k": past_k, "past_v": past_v}
    if cfg.region != "shift":
        bufs |= {"new_k": new_k, "new_v": new_v}
    if rot is not None and cfg.region == "all":  # one packed table: cos, then sin per position
        bufs["rotary_table"] = rot.table(cfg.half)
    elif rot is not None:
        bufs |= {"cos_cache": rot.cos, "sin_cache": rot.sin}
    rows = win.key_seq if cfg.region == "append" else win.cap
    return _with_positions(win.case(bufs, rows, w, _float_tol(cfg, cfg.rotary)), rot)


def _row_inputs(cfg: RowConfig, rng: np.random.Generator, batch: int, seq: int, positions: int):
    h, d = cfg.kv_heads, cfg.head_dim
    it = dtype(cfg.input_type)
    src_k, src_v = (values(rng, (batch, seq, h * d), it) for _ in range(2))
    bufs: dict[str, np.ndarray] = {"src_k": src_k, "src_v": src_v}
    norm = rot = None
    if cfg.k_norm:
        norm = reference.KNorm(rng.uniform(0.5, 1.5, d).astype(np.float32), cfg.eps)
        bufs["k_norm_weight"] = norm.weight
    if cfg.rotary:
        rot = _rotary(rng, positions, cfg.half)
        bufs |= {"cos_cache": rot.cos, "sin_cache": rot.sin}
    return bufs, src_k.astype(np.float32), src_v.astype(np.float32), norm, rot


@case_generator("build")
def build_case(cfg: BuildConfig, rng: np.random.Generator, i: int) -> Case:
    batch, seq, past = 1 + i % 2, [1, 13, 70][i % 3], [0, 5, 31][i % 3]
    h = cfg.kv_heads
    bufs, k, v, norm, rot = _row_inputs(cfg, rng, batch, seq, past + seq)
    pk, pv = reference.build(k, v, h, past, norm, rot)
    pt = dtype(cfg.present_type)
    case = Case(
        {"batch": batch, "seq": seq, "pastSeq": past},
        _flat(bufs) | _present("", pk.shape, pt),
        {"count": batch * h * seq, "seq": seq, "pastSeq": past},
        _flat({"present_key": pk.astype(pt), "present_value": pv.astype(pt)}),
        tolerance={"present_key": _float_tol(cfg, cfg.k_norm or cfg.rotary)},
    )
    return _with_positions(case, rot)


def _quant(cfg: QuantConfig, rng: np.random.Generator, per_channel: bool) -> reference.Quant:
    n = cfg.kv_heads * cfg.head_dim if per_channel else 1
    top = cfg.qmax
    # Scales that put most values inside the range and some beyond it (clamped).
    k_scale = rng.uniform(1.2, 2.5, n).astype(np.float32) / top
    v_scale = rng.uniform(1.2, 2.5, n).astype(np.float32) / top
    return reference.Quant(cfg.bits, k_scale, v_scale, per_channel, cfg.qmin, cfg.qmax)


def _quant_inputs(
    cfg: QuantConfig, bufs: dict[str, np.ndarray], q: reference.Quant, rot: reference.Rotary | None
) -> dict[str, np.ndarray]:
    """``bufs`` with the scales (and rotary tables) as the config's bindings take them: the
    template's, or packed (``kv_scale``, ``rotary_table``)."""
    if cfg.bindings is not Bindings.PACKED:
        return bufs | {"k_scale": q.k_scale, "v_scale": q.v_scale}
    out = {k: a for k, a in bufs.items() if k not in ("cos_cache", "sin_cache")}
    if rot is not None:
        out["rotary_table"] = rot.table(cfg.half)
    return out | {"kv_scale": q.kv_scale()}


def _quant_case(cfg: QuantConfig, case: Case, transformed: bool) -> Case:
    case.codes = {"present_key": cfg.bits, "present_value": cfg.bits}
    if transformed:
        case.quantized = {"present_key": cfg.bits}
    return case


@case_generator("build_quant")
def build_quant_case(cfg: BuildQuantConfig, rng: np.random.Generator, i: int) -> Case:
    batch, seq, past = 1 + i % 2, [1, 13, 40][i % 3], [0, 5, 31][i % 3]
    per_channel = i % 2 == 0
    bufs, k, v, norm, rot = _row_inputs(cfg, rng, batch, seq, past + seq)
    q = _quant(cfg, rng, per_channel)
    pk, pv = reference.build_quant(k, v, cfg.kv_heads, q, past, norm, rot)
    bufs = _quant_inputs(cfg, bufs, q, rot)
    case = Case(
        {"batch": batch, "seq": seq, "pastSeq": past, "perChannel": int(per_channel)},
        _flat(bufs) | _present("", pk.shape, pk.dtype),
        {"count": batch * cfg.kv_heads * seq, "seq": seq, "pastSeq": past},
        _flat({"present_key": pk, "present_value": pv}),
    )
    case.params["perChannel"] = int(per_channel)
    return _quant_case(cfg, _with_positions(case, rot), cfg.k_norm or cfg.rotary)


@case_generator("append_quant")
def append_quant_case(cfg: AppendQuantConfig, rng: np.random.Generator, i: int) -> Case:
    batch = 2 + i % 2
    cap, seq = [(20, 4), (9, 1), (12, 12)][i % 3]
    per_channel = i % 2 == 1
    seqlens = adversarial_seqlens(rng, batch, seq, cap, i)
    bufs, k, v, norm, rot = _row_inputs(cfg, rng, batch, seq, cap)
    q = _quant(cfg, rng, per_channel)
    w = reference.append_quant(k, v, seqlens, cap, cfg.kv_heads, q, norm, rot)
    bufs = _quant_inputs(cfg, bufs | {"seqlens_k": seqlens}, q, rot)
    case = Case(
        {"batch": batch, "seq": seq, "totalSeq": cap, "perChannel": int(per_channel)},
        _flat(bufs) | _present("", w.key.shape, w.key.dtype),
        {
            "count": batch * cfg.kv_heads * seq,
            "seq": seq,
            "pastSeq": 0,
            "totalSeq": cap,
            "perChannel": int(per_channel),
        },
        _flat({"present_key": w.key, "present_value": w.value}),
        _flat({"present_key": w.mask, "present_value": w.mask}),
    )
    return _quant_case(cfg, _with_positions(case, rot), cfg.k_norm or cfg.rotary)
