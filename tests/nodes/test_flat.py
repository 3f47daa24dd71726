"""The flat walk (kvdsl.nodes.walks) of every mode against the drop-in kernel of the same config.

Each case comes from the verification case generators (random never-zero inputs, outputs
poisoned with a NaN payload, 1-token decode appends, caches filled past capacity) and runs the
flat kernel and the drop-in kernel (same config, the template's walk and workgroup size) on the
interpreter and on the GPU. Copies, conversions and quantisation of plain values are compared
bit for bit, so an element either kernel leaves unwritten shows as poison; rotary is the same
expression in the same order (bit for bit on the interpreter, within a few ulps on the GPU,
where the shader compiler may contract into fma differently); K RMSNorm sums per-vector partials
and stays within a few ulps (quantised: one step in a few codes). Every case is also judged
against the numpy reference, and the flat kernels' dispatch, bindings and config checks are
tested directly.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from kvdsl import catalog
from kvdsl.harness import modes  # noqa: F401  (registers the mode case generators)
from kvdsl.harness.cases import cases_for
from kvdsl.emit import emit
from kvdsl.interp import run as interp_run
from kvdsl.ir import Dispatch, KernelBuilder, u32, workgroups
from kvdsl.kernels.build import BuildConfig
from kvdsl.kernels.config import ConfigError
from kvdsl.kernels.copy import CopyConfig
from kvdsl.kernels.merge import MergeConfig
from kvdsl.kernels.merge_share import MergeShareConfig
from kvdsl.kernels.quant import AppendQuantConfig, BuildQuantConfig
from kvdsl.kernels.window_shift import WindowShiftConfig
from kvdsl.nodes import walks
from kvdsl.reference.judge import POISON_BITS, compare, compare_quantized
from kvdsl.runtime import run as gpu_run
from tests.helpers.fuzz import window_case

from tests.helpers.flat import assert_same_as, kernels
from tests.helpers.backends import backend_run

pytestmark = pytest.mark.filterwarnings("ignore:All-NaN slice")
F16 = dict(present_type="f16", input_type="f16")
# (config, how the flat kernel may differ from the drop-in): "exact", "rotary" or "norm".
CONFIGS = [
    (CopyConfig(128, walk="flat"), "exact"),
    (CopyConfig(6, walk="flat", present_type="u32", fold=1), "exact"),
    (MergeConfig(2, 64, walk="flat"), "exact"),
    (MergeConfig(3, 12, walk="flat", present_type="f16", fold=2), "exact"),
    (MergeConfig(2, 6, walk="flat", **F16), "exact"),
    (MergeShareConfig(2, 64, "retain", "flat"), "exact"),
    (MergeShareConfig(3, 12, "retain", "flat", fold=2, **F16), "exact"),
    (MergeShareConfig(2, 64, "append", "flat"), "exact"),
    (MergeShareConfig(2, 64, "append", "flat", rotary=True), "rotary"),
    (MergeShareConfig(3, 12, "append", "flat", rotary=True, fold=1, **F16), "rotary"),
    (WindowShiftConfig(2, 32, walk="flat"), "exact"),
    (WindowShiftConfig(3, 10, "all", walk="flat", fold=2, **F16), "exact"),
    (WindowShiftConfig(2, 32, "shift", walk="flat"), "exact"),
    (WindowShiftConfig(2, 32, "append", walk="flat"), "exact"),
    (WindowShiftConfig(2, 32, "append", True, walk="flat"), "rotary"),
    (WindowShiftConfig(1, 16, "append", True, walk="flat", fold=1, **F16), "rotary"),
    (BuildConfig(2, 64, walk="flat"), "exact"),
    (BuildConfig(3, 10, walk="flat", present_type="f16", fold=2), "exact"),
    (BuildConfig(2, 64, rotary=True, walk="flat"), "rotary"),
    (BuildConfig(2, 12, rotary=True, walk="flat", fold=1, **F16), "rotary"),
    (BuildConfig(2, 64, k_norm=True, walk="flat"), "norm"),
    (BuildConfig(2, 32, k_norm=True, rotary=True, walk="flat", fold=2), "norm"),
    (BuildConfig(3, 6, k_norm=True, walk="flat", workgroup_size=12), "norm"),
    (BuildQuantConfig(2, 64, 8, walk="flat"), "exact"),
    (BuildQuantConfig(2, 64, 4, walk="flat", fold=2), "exact"),
    (BuildQuantConfig(3, 10, 8, walk="flat", input_type="f16"), "exact"),
    (BuildQuantConfig(2, 64, 8, rotary=True, walk="flat"), "rotary"),
    (BuildQuantConfig(2, 32, 4, rotary=True, walk="flat", fold=1), "rotary"),
    (BuildQuantConfig(2, 64, 8, k_norm=True, walk="flat"), "norm"),
    (BuildQuantConfig(2, 64, 4, k_norm=True, walk="flat"), "norm"),
    (AppendQuantConfig(2, 64, 8, walk="flat"), "exact"),
    (AppendQuantConfig(3, 12, 4, walk="flat", fold=2, qmin=-7, qmax=7), "exact"),
    (AppendQuantConfig(2, 64, 4, k_norm=True, walk="flat"), "norm"),
    # K RMSNorm walks pairs by default (tests/nodes/test_pair.py); its per-vector form, asked:
    (BuildConfig(2, 64, k_norm=True, walk="flat", pairs=False), "norm"),
    (BuildConfig(2, 32, k_norm=True, rotary=True, walk="flat", fold=2, pairs=False), "norm"),
    (BuildQuantConfig(2, 64, 4, k_norm=True, walk="flat", pairs=False), "norm"),
    (AppendQuantConfig(2, 64, 8, k_norm=True, walk="flat", pairs=False), "norm"),
]


@pytest.mark.parametrize("backend", ["interp", "gpu"])
@pytest.mark.parametrize(
    "cfg,kind", CONFIGS, ids=[f"{c.mode}-{i}" for i, (c, _) in enumerate(CONFIGS)]
)
def test_flat_matches_drop_in(cfg, kind, backend, request):
    run = backend_run(backend, request)
    flat_k, drop_k = kernels(cfg)
    assert_same_as(run, flat_k, drop_k, cfg, kind, 7, backend == "gpu")


def test_cases_cover_decode_partial_and_folded_dispatches():
    """The cases above include a 1-token append, a partial last workgroup and a folded grid."""
    decode = partial = folded = 0
    for cfg, _ in CONFIGS:
        flat_k, _ = kernels(cfg)
        for case in cases_for(cfg, 3, seed=7):
            items = case.params["count"] * (cfg.head_dim // _width(flat_k))
            if cfg.mode in ("merge_share", "window_shift", "append_quant"):
                decode += case.params.get("keySeq", case.params.get("seq")) == 1
            partial += items % cfg.workgroup_size != 0
            folded += workgroups(flat_k, case.params)[1] > 1
    assert decode >= 8 and partial >= 40 and folded >= 5


def _width(kernel) -> int:
    b = kernel.binding("present_key") or kernel.binding("present_value")
    n = b.host_values  # eight for f16 words (tests/nodes/test_words.py)
    # A vec2<u32> of packed int4 words holds four elements, like a vec4.
    return 4 if n == 2 else n


def test_decode_append_is_one_round_trip_per_vector():
    """A 1-token append of 8 heads × 128 dims: 256 invocations, one workgroup, no loop."""
    cfg = MergeShareConfig(8, 128, "append", "flat", rotary=True)
    k, _ = kernels(cfg)
    assert workgroups(k, {"count": 8, "seq": 4096, "keySeq": 1}) == (1, 1, 1)
    wgsl = emit(k)
    assert "for (" not in wgsl and "@workgroup_size(WG)" in wgsl and "const WG: u32 = 256u;" in wgsl
    assert "array<vec4<f32>>" in wgsl


def test_dispatch_folds_items_of_vectors():
    cfg = BuildConfig(8, 128, walk="flat", fold=3)
    k, drop = kernels(cfg)
    # 10 rows x 32 vec4 = 320 items -> 2 workgroups; 100 rows -> 13 workgroups -> (3, 5).
    assert workgroups(k, {"count": 10, "seq": 10, "pastSeq": 0}) == (2, 1, 1)
    assert workgroups(k, {"count": 100, "seq": 10, "pastSeq": 0}) == (3, 5, 1)
    # Past the fold the flat walks spread the workgroups evenly over y rows (balanced): 32
    # rows -> 4 workgroups -> (2, 2), where the template's rule would launch (3, 2).
    assert workgroups(k, {"count": 32, "seq": 8, "pastSeq": 0}) == (2, 2, 1)
    assert k.dispatch.balanced and not drop.dispatch.balanced
    assert "let e = gid.x + gid.y * nwg.x * WG;" in emit(k)
    assert "wid.y * 3u" in emit(drop) and "nwg" not in emit(drop)
    # emitted/index.json tells a host which rule a kernel follows
    from kvdsl.contract.index import dispatch

    flat_rule, drop_rule = dispatch(k), dispatch(drop)
    assert flat_rule["balanced"] and "(ceil(n / y), y, 1)" in flat_rule["rule"]
    assert not drop_rule["balanced"] and drop_rule["rule"].endswith("(fold, ceil(n / fold), 1)")


def test_balanced_dispatch_rule():
    """x = ceil(n / y) with y = ceil(n / fold): never more than y - 1 workgroups past n, where
    the template's rule (x = fold) launches up to fold - 1 more (65,536 groups: 131,070)."""
    from kvdsl.ir import Dispatch
    from kvdsl.ir.dispatch import DispatchError
    from kvdsl.ir.tree import Lit

    k, _ = kernels(BuildConfig(8, 128, walk="flat"))
    for n, balanced, template in [
        (65535, (65535, 1, 1), (65535, 1, 1)),
        (65536, (32768, 2, 1), (65535, 2, 1)),
        (131071, (43691, 3, 1), (65535, 3, 1)),
        (10**6, (62500, 16, 1), (65535, 16, 1)),
    ]:
        for flag, want in ((True, balanced), (False, template)):
            d = Dispatch(Lit(n * 256, u32), 256, 65535, balanced=flag)
            assert workgroups(dataclasses.replace(k, dispatch=d), {}) == want, (n, flag)
            x, y, _ = want
            assert x * y >= n and (x * y - n < y if flag else True)
    too_many = Dispatch(Lit(2**32 - 1, u32), 1, 65535, balanced=True)  # 65,537 rows
    with pytest.raises(DispatchError, match="past the device's 65535 per dimension"):
        workgroups(dataclasses.replace(k, dispatch=too_many), {})


@pytest.mark.parametrize("backend", ["interp", "gpu"])
@pytest.mark.parametrize("count", [48, 88, 128])
def test_balanced_fold_writes_every_row_once(count, backend, request):
    """Flat builds whose workgroups pass a fold of 5 (6, 11 and 16 workgroups as (3, 2),
    (4, 3) and (4, 4), where the template's rule launches 10, 15 and 20) write every element
    of the drop-in's output, bit for bit, and nothing past it (poisoned tail), with and without
    K RMSNorm's clamped walk."""
    run = backend_run(backend, request)
    rng = np.random.default_rng(count)
    for cfg in (
        BuildConfig(2, 32, walk="flat", fold=5, workgroup_size=64),
        BuildConfig(2, 64, k_norm=True, walk="flat", fold=5, workgroup_size=64),
    ):
        flat_k, drop_k = kernels(cfg)
        seq = count // cfg.kv_heads
        params = {"count": count, "seq": seq, "pastSeq": 0}
        src = rng.uniform(0.5, 2.0, (2, count * cfg.head_dim)).astype(np.float32)
        src *= rng.choice([-1, 1], src.shape)
        tail = 36  # nine vectors past the kernel's extent, which no walk may write
        out = np.full(count * cfg.head_dim + tail, np.nan, np.float32)
        bufs = {"src_k": src[0], "src_v": src[1], "present_key": out, "present_value": out}
        if cfg.k_norm:
            bufs["k_norm_weight"] = rng.uniform(0.5, 1.5, cfg.head_dim).astype(np.float32)
        wg = workgroups(flat_k, params)
        assert wg[1] > 1 and wg[0] < 5, wg  # folded, balanced
        got = run(flat_k, dict(bufs), params)
        want = run(drop_k, dict(bufs), params)
        # The kernel reads x back, so the template's geometry (x = fold) writes the same.
        template_geometry = (5, wg[1], 1)
        again = run(flat_k, dict(bufs), params, workgroups=template_geometry)
        for name in ("present_key", "present_value"):
            assert np.array_equal(got[name].view(np.uint32), again[name].view(np.uint32))
            assert np.isnan(got[name][-tail:]).all(), name
            if cfg.k_norm and name == "present_key":
                _, problem = compare(got[name][:-tail], want[name][:-tail], 4e-6)
                assert not problem, problem
            else:
                assert np.array_equal(got[name].view(np.uint32), want[name].view(np.uint32))


def test_bindings_and_extents_count_vectors():
    k = catalog.build_config(AppendQuantConfig(8, 128, 4, walk="flat"))
    elems = {b.name: str(b.elem) for b in k.bindings}
    assert elems["src_k"] == "vec4<f32>" and elems["present_key"] == "vec2<u32>"
    assert elems["k_scale"] == "f32" and elems["seqlens_k"] == "i32"
    from kvdsl.runtime.contract import evaluate

    params = {"count": 16, "seq": 2, "pastSeq": 0, "totalSeq": 10, "perChannel": 1}
    ext = {n: evaluate(e, k, params, {}) for n, e in k.extents}
    # 1 batch x 8 heads x 10 rows x 64 words = 5120 words = 2560 vec2<u32>.
    assert ext["present_key"] == 2560 and ext["src_k"] == 2 * 8 * 128 // 4
    assert ext["k_scale"] == 8 * 128


def test_int4_layout_is_the_drop_ins():
    """Packed words: element 2j in the low nibble, as the per-row kernel stores them."""
    cfg = BuildQuantConfig(1, 8, 4, walk="flat", qmin=-8, qmax=7)
    k, _ = kernels(cfg)
    src = np.array([[-8.0, 7.0, 1.0, -1.0, 3.0, 0.5, -3.0, 2.0]], np.float32)
    out = interp_run(
        k,
        {
            "src_k": src.reshape(-1),
            "src_v": src.reshape(-1),
            "k_scale": np.ones(1, np.float32),
            "v_scale": np.ones(1, np.float32),
            "present_key": np.full(4, 0xDEADBEEF, np.uint32),
            "present_value": np.full(4, 0xDEADBEEF, np.uint32),
        },
        {"count": 1, "seq": 1, "pastSeq": 0, "perChannel": 0},
    )
    # round(0.5) ties to even: 0 -> nibble 8.
    assert out["present_key"].tolist() == [
        0x0 | 0xF << 4,
        0x9 | 0x7 << 4,
        0xB | 0x8 << 4,
        0x5 | 0xA << 4,
    ]


def test_workgroup_size_defaults():
    assert MergeConfig(8, 128, walk="flat").workgroup_size == 256
    assert MergeConfig(8, 128).workgroup_size == 64
    assert BuildConfig(8, 128, walk="flat", workgroup_size=128).workgroup_size == 128


@pytest.mark.parametrize(
    "make,field",
    [
        (lambda: BuildConfig(3, 6, k_norm=True, walk="flat"), "workgroup_size"),
        (lambda: BuildQuantConfig(2, 6, 4, walk="flat"), "head_dim"),
        (lambda: BuildQuantConfig(2, 12, 4, rotary=True, walk="flat"), "head_dim"),
        (lambda: WindowShiftConfig(2, 8, walk="cooperative"), "walk"),
        (lambda: BuildConfig(2, 8, walk="hybrid"), "walk"),
    ],
)
def test_flat_config_errors(make, field):
    with pytest.raises(ConfigError) as err:
        make()
    assert err.value.field == field


def test_poison_survives_outside_the_window():
    """The flat retain pass leaves the append window's rows poisoned (it does not own them)."""
    cfg = MergeShareConfig(2, 64, "retain", "flat")
    k, _ = kernels(cfg)
    case = cases_for(cfg, 1, seed=3)[0]
    got = interp_run(k, dict(case.buffers), case.params)["present_key"]
    untouched = ~case.written["present_key"].reshape(-1)
    assert untouched.any()
    assert (got.view(np.uint32)[untouched] == POISON_BITS[4]).all()


def _append_past_capacity(cfg, seed: int) -> tuple[dict, dict]:
    """Buffers and params of an append of 7 new tokens into a 5-row cache (the first two tokens
    do not fit), 3 batches with adversarial ``seqlens_k`` (so the last workgroup is partial),
    per-tensor scales (an even ``seed``)."""
    case = window_case(cfg, 5, 7, np.array([-5, 3, 40], np.int32), seed)
    assert case.params["perChannel"] == 0
    return case.buffers, case.params


KNORM_APPENDS = [
    AppendQuantConfig(2, 64, 8, k_norm=True, walk="flat"),
    AppendQuantConfig(3, 32, 4, k_norm=True, walk="flat", workgroup_size=64),
    AppendQuantConfig(2, 64, 8, k_norm=True, rotary=True, walk="flat", bindings="template"),
    AppendQuantConfig(3, 32, 4, k_norm=True, walk="flat", workgroup_size=64, pairs=False),
]


@pytest.mark.parametrize("cfg", KNORM_APPENDS, ids=["int8", "int4", "int8-rotary", "int4-vector"])
def test_flat_knorm_append_past_capacity(cfg):
    """The flat K-RMSNorm append issues its loads before the barrier, with skipped tokens (keySeq
    > capacity) and invocations past the end still loading in range (the interpreter checks every
    access) and storing nothing: equal to the per-row kernel, every poisoned row overwritten."""
    flat_k, drop_k = kernels(cfg)
    bufs, params = _append_past_capacity(cfg, 2)
    assert params["count"] * cfg.head_dim // _width(flat_k) % cfg.workgroup_size != 0
    got = interp_run(flat_k, dict(bufs), params)
    want = interp_run(drop_k, dict(bufs), params)
    bits = np.uint32(POISON_BITS[4])
    for name in ("present_key", "present_value"):
        poisoned = want[name].view(np.uint32) == bits
        assert not poisoned.any()  # 7 tokens into 5 rows: the newest 5 fill every row
        assert np.array_equal(got[name].view(np.uint32) == bits, poisoned), name
        _, problem = compare_quantized(got[name], want[name], cfg.bits, ~poisoned)
        assert not problem, f"{name}: {problem}"


@pytest.mark.parametrize("pairs", [False, True])
def test_flat_knorm_rotary_append_into_an_empty_cache(pairs):
    """totalSeq = 0 (the host contract allows it for append_quant): the rotary K RMSNorm append
    loads cos/sin at the window's row before its barrier, and an empty cache has neither rows
    nor table. The kernel leaves uniformly first; found by the config fuzz
    (tests/harness/test_fuzz.py), which read cos_cache[0] of an empty table here."""
    cfg = AppendQuantConfig(
        1, 8, 8, k_norm=True, rotary=True, walk="flat", bindings="template", pairs=pairs
    )
    kernel = catalog.build_config(cfg)
    assert "if (params.totalSeq == 0u) {" in emit(kernel)
    for seqlens in ([0], [5, -1]):
        case = window_case(cfg, 0, 2, np.array(seqlens, np.int32), 3)
        assert case.buffers["cos_cache"].size == 0 and case.params["totalSeq"] == 0
        got = interp_run(kernel, dict(case.buffers), case.params, strict_init=True)
        assert not case.against_reference(got)


def test_flat_knorm_append_past_capacity_gpu(gpu):
    cfg = KNORM_APPENDS[0]
    flat_k, _ = kernels(cfg)
    bufs, params = _append_past_capacity(cfg, 4)
    got = gpu_run(flat_k, dict(bufs), params)
    want = interp_run(flat_k, dict(bufs), params)
    for name in ("present_key", "present_value"):
        _, problem = compare_quantized(got[name], want[name], cfg.bits)
        assert not problem, f"{name}: {problem}"


@pytest.mark.parametrize(
    "cfg, size, lanes",
    [
        (BuildConfig(8, 128, walk="flat"), 256, 256),
        (BuildConfig(8, 128, k_norm=True, walk="flat"), 128, 128),  # a barrier: smaller groups
        (BuildConfig(8, 128, k_norm=True, walk="flat", reduction="subgroup"), 256, 256),
        (BuildQuantConfig(8, 128, bits=4, k_norm=True, walk="flat"), 128, 128),
        (AppendQuantConfig(8, 128, k_norm=True, walk="flat", pairs=False), 128, 128),
        # The template's walk: 64 rows per workgroup, walked by 256 invocations.
        (BuildConfig(8, 128, k_norm=True), 64, 256),
        (BuildConfig(8, 128, k_norm=True, walk="flat", workgroup_size=64), 64, 64),  # as given
    ],
)
def test_default_workgroup_size(cfg, size, lanes):
    assert cfg.workgroup_size == size
    kernel = catalog.build_config(cfg, "k")
    assert kernel.workgroup_size == (lanes, 1, 1)
    assert kernel.dispatch.per_group == size


KNORM_BLOCKS = [
    BuildConfig(2, 96, k_norm=True, rotary=True),  # 12 pairs a row: 192 lanes, 16 rows a step
    BuildConfig(3, 24, k_norm=True, workgroup_size=7),  # 3 pairs a row: 21 lanes
    AppendQuantConfig(2, 96, 8, k_norm=True),
    BuildQuantConfig(2, 80, 4, k_norm=True),  # 10 pairs a row: 160 lanes
]


@pytest.mark.parametrize("backend", ["interp", "gpu"])
@pytest.mark.parametrize("cfg", KNORM_BLOCKS, ids=[f"{c.mode}-{c.head_dim}" for c in KNORM_BLOCKS])
def test_knorm_drop_ins_walk_whole_rows_per_step(cfg, backend, request):
    """K RMSNorm drop-ins whose rows do not divide the template's 64 lanes still walk in blocks:
    the lanes are a multiple of a row's items (each step holds whole rows) that divides the
    block, and the outputs match the reference."""
    run = backend_run(backend, request)
    items = cfg.head_dim // 8  # pairs of vec4 a row
    lanes = walks.block_lanes(cfg.workgroup_size, items, whole_rows=True)
    assert cfg.plan.block_walk and lanes % items == 0 and lanes > cfg.workgroup_size
    kernel = catalog.build_config(cfg)
    assert (
        kernel.workgroup_size == (lanes, 1, 1) and kernel.dispatch.per_group == cfg.workgroup_size
    )
    for case in cases_for(cfg, 3, seed=11):
        got = run(kernel, dict(case.buffers), case.params)
        assert not case.against_reference(got), case.label()


@pytest.mark.parametrize("rows,groups", [(9, 1), (64, 1), (9, 3)])
def test_unguarded_block_walk_stops_after_the_last_step_with_items(rows, groups):
    """A block walk with a barrier ahead (K RMSNorm) cannot break out of its loop: its bound
    stops at the last step that holds an item, and a workgroup wholly past the end (a folded
    grid's extras) runs none. WG = 64 rows of 32 items, 256 lanes: 8 steps a full block."""
    cfg = dataclasses.replace(BuildConfig(2, 128), walk="per_row", fold=65535)
    kb = KernelBuilder("k", workgroup_size=64)
    out = kb.binding("out", u32, "read_write")
    per_row = kb.const("PER_ROW", u32, 32)
    it = walks.vectors(
        kb, cfg.fold, kb.param("rows"), per_row, 1, guard=False, blocks=cfg.plan.blocks
    )
    out[it.e] = it.row + 1
    kernel = kb.build(Dispatch(kb.param("rows").node, 64, 65535))
    assert kernel.workgroup_size == (256, 1, 1)
    poison = np.full(groups * 64 * 32, 0xDEADBEEF, np.uint32)
    got = interp_run(kernel, {"out": poison}, {"rows": rows}, (groups, 1, 1))["out"]
    steps = -(-rows * 32 // 256)  # the steps that hold an item of the first block
    written = np.arange(steps * 256)
    # Lanes past the end in the last step hold the last row (loads stay in range).
    want = np.minimum(written // 32, rows - 1) + 1
    np.testing.assert_array_equal(got[: steps * 256], want)
    assert (got[steps * 256 :] == 0xDEADBEEF).all()


def test_knorm_rows_longer_than_the_lanes_keep_the_template_walk():
    """A K RMSNorm row of more items than a workgroup may hold keeps the per-row walk."""
    cfg = BuildConfig(1, 258, k_norm=True)  # 258 scalar items a row
    assert not cfg.plan.block_walk
    kernel = catalog.build_config(cfg)
    assert kernel.workgroup_size == (64, 1, 1) and "Block walk" not in emit(kernel)
    for case in cases_for(cfg, 2, seed=3):
        got = interp_run(kernel, dict(case.buffers), case.params)
        assert not case.against_reference(got), case.label()
