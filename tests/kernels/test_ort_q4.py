"""``ort_q4`` (kvdsl.nodes.formats.ort): ONNX Runtime WebGPU's 4-bit rows written by kvdsl's
writers on the GPU and the interpreter, against the numpy port of ORT's encoder
(kvdsl.reference.ort_tq) on 2,000 seeded rows with outlier channels; the writers' and readers'
other forms on the interpreter against kvdsl.reference.formats bit for bit; a session over it
with attention; the refusals."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import interp
from kvdsl.catalog import build_config
from kvdsl.harness.runner import verify_variant
from kvdsl.kernels.attend import AttendConfig
from kvdsl.kernels.config import ConfigError
from kvdsl.kernels.dense import (
    DenseAppendConfig,
    DenseBuildConfig,
    DenseReadConfig,
    dense_append,
    dense_build,
    dense_read,
)
from kvdsl.kernels.dense_convert import DenseConvertConfig
from kvdsl.kernels.dense_modes import DenseWindowShiftConfig
from kvdsl.kernels.paged import PagedAppendConfig
from kvdsl.kernels.qkv import QkvConfig
from kvdsl.kernels.qkv_paged import PagedQkvConfig
from kvdsl.nodes.formats import FORMATS, ORT_Q4
from kvdsl.nodes.formats import ort as node
from kvdsl.reference import formats as fm
from kvdsl.reference import ort_tq
from kvdsl.reference.judge import POISON_BITS
from kvdsl.reference.modes import KNorm, Rotary
from kvdsl.runtime import run as gpu_run
from kvdsl.session import GpuHost, InterpHost, Session, Spec
from tests.helpers.ort import seeded_rows

F32 = np.float32
POISON = POISON_BITS[4]
#: Rows of the byte-for-byte check: 2 heads x 1,000 tokens of head size 128.
HEADS, TOKENS, D = 2, 1000, 128


def test_the_tables_are_ort_s():
    assert np.array_equal(np.array(node.CENTROIDS, F32), ort_tq.CENTROIDS)
    assert np.array_equal(np.array(node.BOUNDARIES, F32), ort_tq.BOUNDARIES)
    assert node.MAX_THREADS == ort_tq.MAX_THREADS
    for d in (8, 16, 32, 64, 128, 256, 512, 1024):
        assert F32(node.inverse_sqrt(d)) == F32(1) / np.sqrt(F32(d))
    assert FORMATS["ort_q4"] == ORT_Q4 and ORT_Q4.row_words(128, True) == 17
    assert ORT_Q4.bytes_per_row(128, True) == ort_tq.row_bytes(128) == 68


def build_case(split: bool):
    """``dense_build`` of :data:`TOKENS` tokens of :data:`HEADS` heads (2,000 rows, no
    rotary): its buffers, params and the rows ``[H, T, D]``."""
    x = seeded_rows(HEADS * TOKENS, D, 47).reshape(HEADS, TOKENS, D)
    v = seeded_rows(HEADS * TOKENS, D, 48).reshape(HEADS, TOKENS, D)
    cfg = DenseBuildConfig(HEADS, D, format="ort_q4", split=split)
    words = HEADS * TOKENS * 17
    bsh = [np.ascontiguousarray(a.transpose(1, 0, 2)).reshape(-1) for a in (x, v)]
    bufs = {"src_k": bsh[0], "src_v": bsh[1]}
    bufs |= {n: np.full(words, POISON, np.uint32) for n in ("present_key", "present_value")}
    return cfg, bufs, {"count": HEADS * TOKENS, "seq": TOKENS, "pastSeq": 0}, x, v


def judge(got: np.ndarray, rows: np.ndarray) -> tuple[int, int]:
    """Stored words ``got`` ``[..., 17]`` against ORT's encoder of ``rows``: the norm within 1
    ulp and every code ORT's but where ``x / norm`` lies within 4 ulps of a boundary (then one
    step off at most). Returns (norms off by an ulp, codes one step off)."""
    want = ort_tq.quantize(rows)
    g_norm, w_norm = got[..., 0].view(F32), want[..., 0].view(F32)
    ulps = np.abs(got[..., 0].astype(np.int64) - want[..., 0].astype(np.int64))
    assert np.all(ulps <= 1), f"a norm {g_norm.flat[ulps.argmax()]} != {w_norm.flat[ulps.argmax()]}"
    _, g_idx = ort_tq.codes(got, D)
    _, w_idx = ort_tq.codes(want, D)
    off = g_idx != w_idx
    if off.any():
        rotated = ort_tq.hadamard(rows)
        unit = rotated * (F32(1) / w_norm)[..., None]
        near = np.min(np.abs(unit[..., None] - ort_tq.BOUNDARIES), axis=-1)
        step = np.abs(g_idx.astype(np.int64) - w_idx.astype(np.int64))
        assert np.all(step[off] == 1), "a code more than one step off"
        assert np.all(
            near[off] <= 4 * np.spacing(np.abs(unit[off]) + F32(0.25))
        ), "a code off away from a boundary"
    return int((ulps > 0).sum()), int(off.sum())


@pytest.mark.parametrize("split", [True, False], ids=["split", "joint"])
def test_the_interpreter_writes_ort_s_bytes(split):
    cfg, bufs, params, x, v = build_case(split)
    out = interp.run(dense_build(cfg), bufs, params)
    for name, rows in (("present_key", x), ("present_value", v)):
        got = out[name].reshape(HEADS, TOKENS, 17)
        assert np.array_equal(got, ort_tq.quantize(rows)), name


def test_the_gpu_writes_ort_s_bytes(gpu):
    cfg, bufs, params, x, v = build_case(True)
    out = gpu_run(dense_build(cfg), bufs, params)
    norms = codes = 0
    for name, rows in (("present_key", x), ("present_value", v)):
        n, c = judge(out[name].reshape(HEADS, TOKENS, 17), rows)
        norms, codes = norms + n, codes + c
    # Every norm within 1 ulp (judge): a GPU may contract the squares' sum into fma (on
    # llvmpipe about 7% of the norms are 1 ulp off); a code one step off only where its value
    # lies on a boundary to a few ulps, at most 1 in 10,000 codes.
    assert codes <= 2 * HEADS * TOKENS * D // 10000, (norms, codes)


def append_case(cfg: DenseAppendConfig, seed: int):
    rng = np.random.default_rng(seed)
    b, s, cap, h, d = 2, 5, 9, cfg.kv_heads, cfg.head_dim
    new_k = seeded_rows(b * s * h, d, seed).reshape(b, s, h * d)
    new_v = seeded_rows(b * s * h, d, seed + 1).reshape(b, s, h * d)
    seqlens = np.array([3, 30], np.int32)
    bufs = {"src_k": new_k.reshape(-1), "src_v": new_v.reshape(-1), "seqlens_k": seqlens}
    rot = norm = None
    if cfg.rotary:
        theta = rng.uniform(0, 6.3, (cap, d // 2))
        rot = Rotary(np.cos(theta).astype(F32), np.sin(theta).astype(F32))
        bufs |= {"cos_cache": rot.cos.reshape(-1), "sin_cache": rot.sin.reshape(-1)}
    if cfg.k_norm:
        norm = KNorm(rng.uniform(0.5, 1.5, d).astype(F32), cfg.eps)
        bufs["k_norm_weight"] = norm.weight
    want = fm.dense_append(new_k, new_v, seqlens, cap, h, "ort_q4", cfg.inline, rot, norm)
    for name in ("present_key", "present_value"):
        bufs[name] = np.full(want.key.size, POISON, np.uint32)
    if not cfg.inline:
        bufs["present_scales"] = np.full(want.scales.size, POISON, np.uint32).view(F32)
    return bufs, {"count": b * h * s, "keySeq": s, "seq": cap}, want


APPENDS = {
    "inline": {},
    "side": {"scales": "side"},
    "rotary-joint": {"rotary": True, "split": False},
    "rotary": {"rotary": True},
    "staged": {"walk": "staged"},
}


@pytest.mark.parametrize("kind", APPENDS)
def test_appends_match_the_reference_bit_for_bit(kind):
    cfg = DenseAppendConfig(2, 64, format="ort_q4", **APPENDS[kind])
    bufs, params, want = append_case(cfg, seed=len(kind))
    out = interp.run(dense_append(cfg), bufs, params)
    for name, expected in (("present_key", want.key), ("present_value", want.value)):
        got = out[name].reshape(expected.shape)
        assert np.all(got[~want.rows] == POISON), f"{name}: a row outside the window written"
        assert np.array_equal(got[want.rows], expected[want.rows]), name
    if not cfg.inline:
        got = out["present_scales"].reshape(want.scales.shape)
        assert np.array_equal(got[want.rows], want.scales[want.rows])


#: Writers whose K RMSNorm (``inverseSqrt``, approximate) keeps them from the reference's bits:
#: checked as the catalog's are (kvdsl.harness: a code may move by one step, a norm by its
#: rounding).
NORMED = {
    "dense_append_knorm_rotary": DenseAppendConfig(
        2, 64, format="ort_q4", k_norm=True, rotary=True
    ),
    "dense_build_knorm_side": DenseBuildConfig(
        2, 64, format="ort_q4", k_norm=True, scales="side", split=False
    ),
    "paged_append_knorm_page_table": PagedAppendConfig(
        2, 64, format="ort_q4", k_norm=True, addressing="page_table"
    ),
    "qkv_norms_rotary": QkvConfig(
        2, 64, q_heads=4, format="ort_q4", q_norm=True, k_norm=True, rotary=True
    ),
    "paged_qkv_rotary_joint": PagedQkvConfig(
        2, 64, q_heads=4, format="ort_q4", rotary=True, split=False
    ),
}


@pytest.mark.parametrize("name", NORMED)
def test_the_other_writers_on_the_interpreter(name):
    cfg = NORMED[name]
    result = verify_variant(name, cfg, build_config(cfg, name), 2, backends=("interp",))
    assert not result.problems, result.problems


def test_the_reference_s_rows_are_ort_s_encoder():
    """kvdsl.reference.formats' ort_q4, rotated by its own_rotation, is ort_tq's encoder, and
    its decoder rotated back ort_tq's."""
    x = seeded_rows(300, 64, 5)
    words, _ = fm.quantize_rows("ort_q4", fm.stored_basis("ort_q4", x))
    assert np.array_equal(words, ort_tq.quantize(x))
    back = fm.original_basis("ort_q4", fm.dequantize_rows("ort_q4", words, None, 64))
    norm = words[:, 0].view(F32)[:, None]  # f32 rounding of ORT's f32 transform, per row
    assert np.all(np.abs(back - ort_tq.dequantize(words, 64)) <= 1e-6 * norm)


def test_read_gives_the_rotated_basis():
    """``dense_read`` gives ``centroid * norm``, the rows in the stored basis (as ORT's
    ``dequantize_rotated``)."""
    n = 21
    x = seeded_rows(2 * n, 64, 9)
    words = ort_tq.quantize(x)
    bufs = {
        "cache_key": words[:n].reshape(-1),
        "cache_value": words[n:].reshape(-1),
        "key": np.full(n * 64, np.nan, F32),
        "value": np.full(n * 64, np.nan, F32),
    }
    out = interp.run(dense_read(DenseReadConfig(2, 64, format="ort_q4")), bufs, {"count": n})
    assert np.array_equal(out["key"].reshape(n, 64), ort_tq.dequantize_rotated(words[:n], 64))
    assert np.array_equal(out["value"].reshape(n, 64), ort_tq.dequantize_rotated(words[n:], 64))


@pytest.mark.parametrize("backend", ["interp", "gpu"])
def test_a_session_over_ort_q4_with_attention(backend, request):
    """Decode steps, each followed by attention over the cache, checked against the oracle
    (bytes) and float64 attention over its rows decoded (0 mismatches)."""
    if backend == "gpu":
        request.getfixturevalue("gpu")
    host = GpuHost() if backend == "gpu" else InterpHost()
    spec = Spec(layers=1, batch=2, kv_heads=2, head_dim=32, capacity=48, format="ort_q4")
    s = Session(spec, host, seed=5, q_heads=4)
    s.prefill([5, 9])
    for _ in range(30):
        s.decode()
    s.check()
    assert s.lengths.tolist() == [35, 39]
    assert sum(step.op == "attend" for step in s.steps) == 30


def _refused(make, field: str, *words: str) -> None:
    with pytest.raises(ConfigError) as err:
        make()
    text = str(err.value)
    assert text.startswith(f"{field}="), text
    for w in words:
        assert w in text, text


def test_the_refusals_name_the_field():
    ort = {"format": "ort_q4"}
    _refused(lambda: DenseAppendConfig(2, 128, rotation=128, **ort), "rotation", "own rotation")
    _refused(lambda: DenseAppendConfig(2, 96, **ort), "head_dim", "a power of two")
    _refused(lambda: DenseAppendConfig(2, 128, run=4, **ort), "run", "None for ort_q4")
    _refused(lambda: PagedAppendConfig(2, 128, rotation=128, **ort), "rotation", "own rotation")
    _refused(lambda: QkvConfig(2, 128, q_heads=4, rotation=128, **ort), "rotation", "0 for")
    _refused(lambda: AttendConfig(2, 128, 4, rotation=128, **ort), "rotation", "own rotation")
    _refused(lambda: DenseConvertConfig(2, 128, **ort), "format", "without a rotation")
    _refused(lambda: DenseConvertConfig(2, 128, source="ort_q4"), "source", "rotated basis")
    _refused(lambda: DenseWindowShiftConfig(2, 128, region="append", **ort), "region", "'shift'")
