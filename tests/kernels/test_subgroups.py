"""Subgroups through every layer: the ``subgroup_size`` builtin and ``subgroupShuffleXor`` in the
builder, verifier (a barrier under a uniform ``if`` on the subgroup size), emitter (``enable
subgroups;``), naga / Tint, the GPU, the interpreter (any subgroup size) and the WGSL frontend;
then the flat K RMSNorm's subgroup reduction (``reduction="subgroup"``) against the reference
at every subgroup size WGSL allows and on this machine's GPU."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from kvdsl import catalog
from kvdsl.harness import cases_for
from kvdsl.emit import emit
from kvdsl.frontend import parse
from kvdsl.frontend.errors import WgslTypeError
from kvdsl.interp import SUBGROUP_SIZES, InterpError
from kvdsl.interp import run as interp
from kvdsl.ir import KernelBuilder, VerifyError, array, convert, f32, shuffle_xor, vec
from kvdsl.ir.features import uses_subgroups
from kvdsl.kernels.build import BuildConfig
from kvdsl.kernels.config import ConfigError
from kvdsl.runtime import run, tint_check
from kvdsl.runtime.device import extensions, naga_source, needs_subgroups

WG = 64


def shuffled(mask: int | None = 5, vector: bool = False, guard: int | None = None):
    """``dst[i] = subgroupShuffleXor(src[i], mask)`` (``mask=None``: ``gid.x % 4``, not uniform;
    ``guard``: invocations from ``gid.x == guard`` on return first), plus ``dst[i] += sg``."""
    kb = KernelBuilder("shuffled", workgroup_size=WG)
    ty = vec(4, f32) if vector else f32
    src = kb.binding("src", ty, "read")
    dst = kb.binding("dst", ty, "read_write")
    i = kb.let("i", kb.gid.x)
    if guard is not None:
        with kb.if_(i >= guard):
            kb.ret()
    m = kb.gid.x % 4 if mask is None else mask
    x = kb.let("x", shuffle_xor(src[i], m))
    dst[i] = x + kb.let("size", convert(f32, kb.subgroup_size))
    return kb.build()


def expected(src: np.ndarray, mask: int, size: int) -> np.ndarray:
    lanes = np.arange(src.shape[0])
    return src[lanes ^ mask] + np.float32(size)


def test_shuffle_builds_emits_and_round_trips() -> None:
    k = shuffled()
    text = emit(k)
    assert text.startswith("enable subgroups;\n\n")
    assert "@builtin(subgroup_size) sg: u32," in text
    assert "subgroupShuffleXor(src[i], 5u)" in text
    assert uses_subgroups(k) and needs_subgroups(text)
    assert emit(parse(text, "shuffled.wgsl")) == text
    # naga rejects the standard directive: the runtime blanks it, keeping line numbers.
    naga = naga_source(text)
    assert "enable" not in naga and naga.count("\n") == text.count("\n")
    # Tint (every browser) requires it and accepts the module.
    assert tint_check({"k": text}) == {"k": None}


@pytest.mark.parametrize(
    "directive, naga, f16, sg",
    [
        ("enable subgroups;", "", False, True),
        ("enable\n  subgroups;", "\n", False, True),  # a line break inside: the line count stays
        ("enable f16, subgroups;", "enable f16;", True, True),
        ("enable subgroups, f16,;", "enable f16;", True, True),
        ("enable /* c */ subgroups;", "", False, True),
        ("// enable subgroups;", "// enable subgroups;", False, False),  # a comment: none
        ("enable f16;", "enable f16;", True, False),
    ],
)
def test_enable_directives_in_any_spelling(directive, naga, f16, sg) -> None:
    # The runtime finds "enable subgroups;" in any spelling: an enable list or a directive
    # over two lines must not reach naga, which refuses subgroups (gfx-rs/wgpu#5555).
    text = directive + "\nfn f() {}\n"
    assert naga_source(text) == naga + "\nfn f() {}\n"
    assert extensions(text) == (f16, sg) and needs_subgroups(text) is sg


def test_frontend_takes_subgroups_with_or_without_enable() -> None:
    # naga refuses `enable subgroups;` and takes the builtins without it: so does kvdsl, and
    # prints the directive back.
    text = emit(shuffled())
    assert parse(text.replace("enable subgroups;\n", "")) == parse(text)
    with pytest.raises(WgslTypeError, match="enable chromium_x: expected extension"):
        parse("enable chromium_x;\n" + text)
    bad = text.replace("@builtin(subgroup_size) sg: u32", "@builtin(subgroup_size) sg: vec3<u32>")
    # A builtin of the wrong type is WGSL's type error (Tint refuses it too).
    with pytest.raises(
        WgslTypeError, match=r"builtin 'sg' of type vec3<u32>: @builtin\(subgroup_size\) is u32"
    ):
        parse(bad)


@pytest.mark.parametrize("size", SUBGROUP_SIZES)
@pytest.mark.parametrize("vector", [False, True])
def test_interpreter_shuffle_every_subgroup_size(size: int, vector: bool) -> None:
    rng = np.random.default_rng(size)
    n = 4 * WG
    shape = (n, 4) if vector else (n,)
    src = rng.uniform(0.5, 2.0, shape).astype(np.float32)
    dst = np.full(shape, np.nan, np.float32)
    # 128 is wider than the workgroup: its one subgroup is the workgroup's 64 invocations.
    k = shuffled(3, vector)
    got = interp(k, {"src": src, "dst": dst}, workgroups=(4, 1, 1), subgroup_size=size)
    np.testing.assert_array_equal(got["dst"], expected(src, 3, size))


def test_verify_refuses_a_shuffle_outside_uniform_control_flow() -> None:
    """WGSL's uniformity analysis (Tint refuses these; naga, as wgpu 0.32 ships it, takes them):
    a shuffle's mask must be uniform, and the shuffle itself in uniform control flow."""
    with pytest.raises(
        VerifyError,
        match=r"the mask of subgroupShuffleXor\(\) must be uniform, but it depends on 'gid' "
        r"\(global_invocation_id, which differs between invocations\)",
    ):
        shuffled(None)
    with pytest.raises(
        VerifyError,
        match=r"subgroupShuffleXor\(\) must be called in uniform control flow, but it depends on "
        r"`if \(i >= 10u\)`, which some invocations may leave by return",
    ):
        shuffled(5, guard=10)
    assert tint_check({"k": emit(shuffled(5))}) == {"k": None}


def test_interpreter_shuffle_rejects_what_wgsl_leaves_indeterminate(monkeypatch) -> None:
    # The verifier refuses these kernels (above): built unverified, the interpreter still
    # refuses to run them rather than make up a value.
    import kvdsl.ir.builder

    monkeypatch.setattr(kvdsl.ir.builder, "verify", lambda kernel, *args: kernel)
    src = np.arange(1, 2 * WG + 1, dtype=np.float32)
    bufs = {"src": src, "dst": np.zeros_like(src)}
    with pytest.raises(
        InterpError,
        match=r"the mask differs within a subgroup: invocation gid=\(1, 0, 0\).* has 1, another of its subgroup 0",
    ):
        interp(shuffled(None), dict(bufs), workgroups=(2, 1, 1))
    with pytest.raises(InterpError, match="mask 5 is not below the subgroup size 4"):
        interp(shuffled(5), dict(bufs), workgroups=(2, 1, 1), subgroup_size=4)
    # Invocations 10.. returned: invocation 8 is the first to read one of them (8 ^ 5 = 13).
    with pytest.raises(InterpError, match=r"gid=\(8, 0, 0\).* reads invocation 13, which is not"):
        interp(shuffled(5, guard=10), dict(bufs), workgroups=(2, 1, 1), subgroup_size=8)
    with pytest.raises(ValueError, match="subgroup_size 24: expected a power of two in 4..128"):
        interp(shuffled(), dict(bufs), workgroups=(2, 1, 1), subgroup_size=24)
    # 48 invocations, subgroups of 32: the second holds 16; local 32 xor 16 does not exist.
    kb = KernelBuilder("odd", workgroup_size=48)
    src_b, dst_b = kb.binding("src", f32, "read"), kb.binding("dst", f32, "read_write")
    dst_b[kb.gid.x] = shuffle_xor(src_b[kb.gid.x], 16)
    with pytest.raises(InterpError, match="reads local invocation 48, past the workgroup's 48"):
        interp(kb.build(), {"src": src[:48], "dst": src[:48] * 0}, workgroups=(1, 1, 1))
    # The partner is named by its own id, not this id xor the mask: in workgroup 1 (ids 48..95)
    # invocation 48 reads local 16, invocation 64 (48 ^ 16 would say 32).
    kb = KernelBuilder("named", workgroup_size=48)
    src_b, dst_b = kb.binding("src", f32, "read"), kb.binding("dst", f32, "read_write")
    with kb.if_((kb.lid.x >= 32).lor(kb.gid.x.eq(64))):
        kb.ret()
    dst_b[kb.gid.x] = shuffle_xor(src_b[kb.gid.x], 16)
    with pytest.raises(InterpError, match=r"gid=\(48, 0, 0\).* reads invocation 64, which is not"):
        interp(kb.build(), {"src": src[:96], "dst": src[:96] * 0}, workgroups=(2, 1, 1))


def test_gpu_shuffle_matches_interpreter(gpu) -> None:
    """On this machine's GPU (llvmpipe's subgroups are 8 wide; any device's are >= 4, so
    masks 1..3 stay inside one), the lanes the interpreter's model predicts."""
    assert gpu["subgroups"], "the adapter has no subgroups feature"
    rng = np.random.default_rng(7)
    n = 8 * WG
    src = rng.uniform(0.5, 2.0, n).astype(np.float32)
    for mask in (1, 2, 3):
        k = shuffled(mask)
        got = run(k, {"src": src, "dst": np.full(n, np.nan, np.float32)}, workgroups=(8, 1, 1))
        size = int(round(float(got["dst"][0] - src[mask])))
        assert size in SUBGROUP_SIZES
        want = interp(
            k,
            {"src": src, "dst": np.zeros(n, np.float32)},
            workgroups=(8, 1, 1),
            subgroup_size=size,
        )
        np.testing.assert_array_equal(got["dst"], want["dst"])


def test_verify_barrier_under_uniform_subgroup_size_branch() -> None:
    def kernel(cond, leave=False):
        kb = KernelBuilder("k", workgroup_size=WG)
        dst = kb.binding("dst", f32, "read_write")
        w = kb.workgroup_var("w", array(f32, WG))
        with kb.if_(cond(kb)):
            w[kb.lid.x] = 1.0
            kb.barrier()
            if leave:
                kb.ret()
        dst[kb.gid.x] = w[(kb.lid.x + 1) % WG]
        return kb.build()

    k = kernel(lambda kb: kb.subgroup_size < 32)
    assert "if (sg < 32u) {" in emit(k)
    with pytest.raises(
        VerifyError, match=r"the condition of `if \(lid.x < sg\)`, which depends on 'lid'"
    ):
        kernel(lambda kb: kb.lid.x < kb.subgroup_size)
    # A return after the barrier, under the same uniform condition: every invocation of the
    # workgroup leaves there or none does, and Tint takes it.
    assert tint_check({"k": emit(kernel(lambda kb: kb.subgroup_size < 32, leave=True))}) == {
        "k": None
    }


def test_reduction_config_errors() -> None:
    with pytest.raises(ConfigError, match="reduction='warp': expected one of 'workgroup', 'sub"):
        BuildConfig(8, 128, k_norm=True, walk="flat", reduction="warp")
    with pytest.raises(ConfigError, match="reduction='subgroup': expected 'workgroup' unless"):
        BuildConfig(8, 128, walk="flat", reduction="subgroup")
    with pytest.raises(ConfigError, match="reduction='subgroup': expected 'workgroup' unless"):
        BuildConfig(8, 128, reduction="subgroup")
    # A row of 512 vectors is more than a block's 256 lanes: the drop-in keeps the per-row walk,
    # which has no row reduction across invocations.
    with pytest.raises(ConfigError, match="on a template walk whose kernel runs in blocks"):
        BuildConfig(1, 2048, k_norm=True, reduction="subgroup")
    assert BuildConfig(8, 128, k_norm=True, reduction="subgroup").walk == "per_row"
    with pytest.raises(ConfigError, match=r"head_dim=96: .*power-of-two .* \(has 24\)"):
        BuildConfig(8, 96, k_norm=True, walk="flat", workgroup_size=96, reduction="subgroup")


SG_VARIANTS = [n for n in catalog.VARIANTS if "_flat_sg_" in n]
#: The drop-ins' subgroup forms (the block walk).
SG_DROP_INS = [n for n in catalog.VARIANTS if "_sg_" in n and "_flat_" not in n]


@pytest.fixture
def no_subgroups(without_feature):
    """This machine's adapter, minus the subgroup feature."""
    without_feature("subgroup")


def test_catalog_has_a_subgroup_form_of_every_knorm_variant() -> None:
    # The windowed variants (flat walk, named *_windowed_*) have no subgroup form, nor do the
    # dense formats' modes, whose row statistic is reduced in workgroup memory (no reduction field).
    knorm = [
        n
        for n, c in catalog.VARIANTS.items()
        if getattr(c, "k_norm", False) and not c.window and hasattr(c, "reduction")
    ]
    plain = sorted(n for n in knorm if "_flat_" in n and "_sg_" not in n)
    assert len(SG_VARIANTS) == 16
    assert sorted(n.replace("_flat_sg_", "_flat_") for n in SG_VARIANTS) == plain
    drop_ins = sorted(n for n in knorm if "_flat_" not in n and "_sg_" not in n)
    assert len(SG_DROP_INS) == 18
    assert sorted(n.replace("_sg_", "_") for n in SG_DROP_INS) == drop_ins
    for n in SG_DROP_INS:
        cfg = catalog.config(n)
        assert cfg.walk == "per_row" and cfg.plan.block_walk and cfg.reduction == "subgroup"


@pytest.mark.parametrize("size", SUBGROUP_SIZES)
@pytest.mark.parametrize(
    "name,pairs",
    [
        ("build_knorm_rotary_flat_sg_gemma3_1b", None),
        ("build_knorm_rotary_flat_sg_gemma3_1b", True),
        ("build_quant_int4_knorm_flat_sg_qwen3_06b", None),
        ("build_quant_int4_knorm_flat_sg_qwen3_06b", True),
        ("build_knorm_rotary_sg_gemma3_1b", None),
        ("append_quant_int8_knorm_sg_qwen3_06b", None),
    ],
)
def test_subgroup_knorm_against_reference_every_size(name: str, pairs: bool, size: int) -> None:
    """Rows of 64 (gemma3) and 32 (qwen3) vectors, or half as many pairs on the pair walk:
    subgroups narrower than, as wide as and wider than a row; every access checked, poisoned
    outputs (the cases poison them). The drop-ins run it once per step of their block walk, so
    the narrow branch's workgroup memory is reused step after step (the interpreter reports a
    read and a write of it with no barrier between)."""
    cfg = dataclasses.replace(catalog.config(name), pairs=pairs)
    kernel = catalog.build_config(cfg, name)
    for case in cases_for(cfg, 3, seed=size):
        got = interp(kernel, dict(case.buffers), case.params, subgroup_size=size)
        assert not case.against_reference(got)


def assert_writes_alike(kernel, other, case) -> dict:
    """Run both kernels on the GPU on ``case``: floats alike to rounding (the sums' order
    differs), quantised codes within one step in a few elements; ``kernel``'s outputs."""
    got = run(kernel, dict(case.buffers), case.params)
    want = run(other, dict(case.buffers), case.params)
    tol = {k: max(v, 1e-5) for k, v in case.tolerance.items()} or {
        k: 1e-5 for k in want if want[k].dtype.kind == "f"
    }
    problems = [(n, p) for n, _, p in case.judge(got, want, tol, case.codes) if p]
    assert not problems, (case.label(), problems)
    return got


@pytest.mark.parametrize("name", SG_VARIANTS + SG_DROP_INS)
def test_subgroup_knorm_gpu_matches_workgroup_form(gpu, name: str) -> None:
    """On the GPU the subgroup form writes what the workgroup form does (floats to rounding,
    quantised codes within one step in a few elements)."""
    cfg = catalog.config(name)
    kernel = catalog.build_config(cfg, name)
    other = catalog.build_config(dataclasses.replace(cfg, reduction="workgroup"))
    for case in cases_for(cfg, 2, seed=3):
        assert_writes_alike(kernel, other, case)


@pytest.mark.parametrize(
    "mode,opts", [("build", dict(rotary=True)), ("build_quant", {}), ("append_quant", dict(bits=4))]
)
def test_legacy_variables_in_the_subgroup_form(gpu, mode, opts):
    """`kvdsl legacy --subgroups`: the template's variables of a K RMSNorm kernel, as the block
    walk's subgroup form, write what the workgroup form writes on the GPU."""
    from tests.helpers.legacy import legacy_vars

    from kvdsl.legacy import config_from_vars

    cfg = config_from_vars(legacy_vars(mode, kv_heads=2, head_dim=64, k_norm=True, **opts))
    sg = dataclasses.replace(cfg, reduction="subgroup")
    kernel, other = catalog.build_config(sg), catalog.build_config(cfg)
    assert "subgroupShuffleXor" in emit(kernel) and sg.plan.block_walk
    for case in cases_for(cfg, 2, seed=5):
        got = assert_writes_alike(kernel, other, case)
        assert not case.against_reference(got), case.label()


def test_verify_on_an_adapter_without_subgroups(no_subgroups, capsys):
    """A device without subgroups cannot run the subgroup variants: `kvdsl verify` still checks
    them in the interpreter, says so, and runs everything else on the GPU."""
    from kvdsl.cli import main

    names = ["build_knorm_flat_sg_qwen3_06b", "build_knorm_flat_qwen3_06b"]
    assert main(["verify", *names, "--cases", "2"]) == 0
    out = capsys.readouterr()
    lines = out.out.splitlines()
    assert any(
        line.startswith(names[0]) and line.endswith("ok (interpreter only: not on this GPU)")
        for line in lines
    ), out.out
    assert any(line.startswith(names[1] + " ") and line.endswith("  ok") for line in lines)
    assert lines[-1] == (
        "1 passed, 0 failed, 1 checked in the interpreter only (this GPU lacks a feature)"
    )
    assert f"{names[0]}: not run on the GPU: the kernel enables subgroups but adapter" in out.err
    assert "has no 'subgroup' feature" in out.err or "has no 'subgroups' feature" in out.err


def test_bench_on_an_adapter_without_subgroups(no_subgroups, tmp_path):
    """The benchmark's rows for a variant this device cannot run say so (n/a) and do not make
    the run fail."""
    import csv

    from tests.helpers.paths import benchmark

    main = benchmark("gpu").main  # benchmarks/gpu.py: the benchmark's entry point

    argv = ["--small", "--out", str(tmp_path), "--repeats", "2", "--warmup", "1"]
    argv += ["--batches", "1", "--variants", "build_knorm_flat_sg_qwen3_06b"]
    assert main(argv) == 0
    with open(tmp_path / "gpu.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows and all(
        r["kvdsl_status"].startswith("n/a: FeatureError: the kernel enables subgroups")
        and r["kvdsl_us"] == ""
        for r in rows
    ), rows
