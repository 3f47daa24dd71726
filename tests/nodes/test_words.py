"""f16 data moves as ``vec4<u32>`` words (kvdsl.nodes.words.width / binding).

The flat walk of a mode that only moves f16 data (copy, merge, merge_share retain and unrotated
append, window_shift unrotated) declares its f16 K/V bindings as ``array<vec4<u32>>`` of eight
halves when the row divides by 8, while the host keeps passing float16 arrays
(:attr:`kvdsl.ir.tree.Binding.data`). Each word kernel runs on the interpreter and the GPU on
random never-zero f16 data with NaN-poisoned outputs, bit for bit against the drop-in kernel of
the same config and the numpy reference; its module needs no ``enable f16;``. A flat walk whose
rows do not divide by 8, or that computes on f16 (rotary, K RMSNorm, conversions), carries four
halves per vector as ``vec2<u32>`` (``words.HALVES``: ``unpack2x16float`` in, ``pack2x16float``
out) and needs no ``enable f16;`` either; rows not of four, and the template's walks, keep f16
scalars. The host checks name the binding and the host dtype; the host type survives a parse of
the emitted text.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from kvdsl import catalog
from kvdsl.harness import modes  # noqa: F401  (registers the mode case generators)
from kvdsl.harness.cases import cases_for
from kvdsl.emit import emit
from kvdsl.frontend import parse
from kvdsl.interp import run as interp_run
from kvdsl.ir import Vec, f16, u32, workgroups
from kvdsl.kernels.build import BuildConfig
from kvdsl.kernels.copy import CopyConfig
from kvdsl.kernels.merge import MergeConfig
from kvdsl.kernels.merge_share import MergeShareConfig
from kvdsl.kernels.quant import BuildQuantConfig
from kvdsl.kernels.window_shift import WindowShiftConfig
from kvdsl.reference.judge import POISON_BITS
from kvdsl.runtime import BufferError
from kvdsl.runtime import device as gpu_device
from kvdsl.runtime import run as gpu_run
from kvdsl.runtime.contract import check_contract
from kvdsl.runtime.layout import check_buffers
from tests.helpers.flat import kernels
from tests.helpers.fuzz import contract_sized
from tests.helpers.backends import backend_run

pytestmark = pytest.mark.filterwarnings("ignore:All-NaN slice")
F16 = dict(present_type="f16", input_type="f16")
WORD_CONFIGS = [
    CopyConfig(16, walk="flat", present_type="f16"),
    CopyConfig(24, walk="flat", present_type="f16", fold=1, workgroup_size=32),
    MergeConfig(2, 16, walk="flat", **F16),
    MergeConfig(3, 8, walk="flat", fold=2, workgroup_size=32, **F16),
    MergeShareConfig(2, 16, "retain", "flat", **F16),
    MergeShareConfig(3, 8, "retain", "flat", fold=2, workgroup_size=32, **F16),
    MergeShareConfig(2, 16, "append", "flat", **F16),
    WindowShiftConfig(2, 16, walk="flat", **F16),
    WindowShiftConfig(3, 8, "shift", walk="flat", fold=2, workgroup_size=32, **F16),
    WindowShiftConfig(2, 16, "append", walk="flat", **F16),
]
# (config, the present binding's element type): four halves as vec2<u32> where a flat row does
# not divide by 8, a pass rotates, or new f32 K/V are converted; f16 scalars where a flat row does
# not divide by 4.
KEPT = [
    (CopyConfig(12, walk="flat", present_type="f16"), "vec2<u32>"),
    (CopyConfig(6, walk="flat", present_type="f16"), "f16"),
    (MergeConfig(2, 4, walk="flat", **F16), "vec2<u32>"),
    (MergeConfig(2, 16, walk="flat", present_type="f16"), "vec2<u32>"),
    (MergeShareConfig(2, 12, "retain", "flat", **F16), "vec2<u32>"),
    (MergeShareConfig(2, 16, "append", "flat", rotary=True, **F16), "vec2<u32>"),
    (WindowShiftConfig(2, 4, walk="flat", **F16), "vec2<u32>"),
    (WindowShiftConfig(2, 16, "append", True, walk="flat", **F16), "vec2<u32>"),
]
# Flat kernels that compute on four halves per vector, each run on the interpreter and the GPU.
HALF_CONFIGS = [
    MergeShareConfig(2, 16, "append", "flat", rotary=True, **F16),
    MergeShareConfig(2, 16, "append", "flat", rotary=True, pairs=True, **F16),
    WindowShiftConfig(2, 16, "append", True, walk="flat", **F16),
    CopyConfig(12, walk="flat", present_type="f16"),
    MergeConfig(2, 16, walk="flat", present_type="f16"),
    BuildConfig(2, 16, rotary=True, walk="flat", input_type="f16", present_type="f16"),
    BuildConfig(2, 16, k_norm=True, walk="flat", present_type="f16", workgroup_size=32),
    BuildQuantConfig(2, 16, bits=8, walk="flat", input_type="f16"),
]


def _ids(cfgs) -> list[str]:
    return [f"{c.mode}-{i}" for i, c in enumerate(cfgs)]


def exact_to_reference(case, got) -> list[str]:
    """Problems of ``got`` against the reference with no tolerance at all (words only move)."""
    return [f"{case.label()} {n}: {p}" for n, _, p in case.judge(got, tolerance={}) if p]


@pytest.mark.parametrize("cfg", WORD_CONFIGS, ids=_ids(WORD_CONFIGS))
def test_word_interface(cfg):
    k, drop = kernels(cfg)
    data = [b for b in k.bindings if b.data is not None]
    assert data and all(b.elem == Vec(4, u32) and b.data == f16 for b in data)
    # The drop-in (the template's dispatch, walked in blocks) moves the same words.
    assert {b.name for b in data} == {b.name for b in drop.bindings if b.host == f16}
    assert [b for b in drop.bindings if b.data is not None] == data
    assert all(b.host_values == 8 for b in data)
    text = emit(k)
    assert "enable f16;" not in text and "vec4<f16>" not in text
    assert "HEAD_DIM_V8" in text and "HEAD_DIM_V4" not in text
    assert gpu_device.extensions(text) == (False, False)  # runs without shader-f16
    assert "enable f16;" not in emit(drop)


@pytest.mark.parametrize("backend", ["interp", "gpu"])
@pytest.mark.parametrize("cfg", WORD_CONFIGS, ids=_ids(WORD_CONFIGS))
def test_words_match_drop_in_and_reference(cfg, backend, request):
    run = backend_run(backend, request)
    k, drop = kernels(cfg)
    for case in cases_for(cfg, 3, seed=11):
        assert all(a.dtype == np.float16 for n, a in case.buffers.items() if n != "seqlens_k")
        got = run(k, dict(case.buffers), case.params)
        want = run(drop, dict(case.buffers), case.params)
        for name, expected in case.expected.items():
            assert got[name].dtype == np.float16 and got[name].shape == expected.shape
            # Bit for bit: every element the drop-in wrote, and the poison it left.
            assert np.array_equal(got[name].view(np.uint16), want[name].view(np.uint16)), name
        assert not exact_to_reference(case, got)


@pytest.mark.parametrize("cfg", WORD_CONFIGS[::2], ids=_ids(WORD_CONFIGS[::2]))
def test_inputs_cut_to_their_extents_suffice(cfg):
    """Extents count words (eight halves): inputs cut to exactly them run without a stray read."""
    k, _ = kernels(cfg)
    case = cases_for(cfg, 3, seed=13)[2]
    got = interp_run(k, contract_sized(k, case), case.params)
    assert not exact_to_reference(case, got)


def test_cases_cover_decode_partial_and_folded_dispatches():
    decode = partial = folded = 0
    for cfg in WORD_CONFIGS:
        k, _ = kernels(cfg)
        for case in cases_for(cfg, 3, seed=11):
            items = case.params["count"] * (cfg.head_dim // 8)
            decode += case.params.get("keySeq", 0) == 1
            partial += items % cfg.workgroup_size != 0
            folded += workgroups(k, case.params)[1] > 1
    assert decode >= 4 and partial >= 10 and folded >= 3


def test_poison_survives_outside_the_append_window():
    """The retain pass moves words only outside the window: the window keeps its poison."""
    cfg = MergeShareConfig(2, 16, "retain", "flat", **F16)
    k, _ = kernels(cfg)
    case = cases_for(cfg, 1, seed=3)[0]
    got = interp_run(k, dict(case.buffers), case.params)["present_key"]
    untouched = ~case.written["present_key"].reshape(-1)
    assert untouched.any() and (~untouched).any()
    assert (got.view(np.uint16)[untouched] == POISON_BITS[2]).all()


def test_window_shift_clears_words_to_zero_halves():
    cfg = WindowShiftConfig(1, 8, walk="flat", **F16)
    k, _ = kernels(cfg)
    rng = np.random.default_rng(5)
    past = rng.uniform(0.25, 2.0, 4 * 8).astype(np.float16)
    new = rng.uniform(0.25, 2.0, 1 * 8).astype(np.float16)
    poisoned = np.full(4 * 8, POISON_BITS[2], np.uint16).view(np.float16)
    bufs = {"past_k": past, "past_v": -past, "new_k": new, "new_v": -new}
    bufs |= {"seqlens_k": np.array([1], np.int32)}  # 2 tokens resident of a 4-row window
    bufs |= {"present_key": poisoned, "present_value": poisoned}
    out = interp_run(k, bufs, {"count": 4, "seq": 4, "keySeq": 1})
    key = out["present_key"].reshape(4, 8)
    assert np.array_equal(key[0], past[:8]) and np.array_equal(key[1], new)
    assert (key[2:].view(np.uint16) == 0).all()  # +0.0 halves, not stale poison


@pytest.mark.parametrize("cfg,elem", KEPT, ids=_ids([c for c, _ in KEPT]))
def test_rows_not_of_eight_rotary_and_conversions_keep_halves(cfg, elem):
    k = catalog.build_config(cfg)
    text = emit(k)
    assert str(k.binding("present_key").elem) == elem and "vec4<u32>" not in text
    if elem == "f16":
        assert all(b.data is None for b in k.bindings) and "enable f16;" in text
    else:
        assert k.binding("present_key").data == f16 and k.binding("present_key").host_values == 4
        assert "enable f16;" not in text and "vec4<f16>" not in text


@pytest.mark.parametrize("backend", ["interp", "gpu"])
@pytest.mark.parametrize("cfg", HALF_CONFIGS, ids=_ids(HALF_CONFIGS))
def test_halves_in_words_match_reference_without_f16(cfg, backend, request):
    """Four halves per ``vec2<u32>``: no ``enable f16;``, the reference's values (rotary and
    the norm within the usual tolerance), and the GPU as ``kvdsl verify`` judges it against the
    interpreter: within the case's tolerance where a rotation's multiply-adds may contract into
    fmas (on an H200 under naga some halves differ by a step), and bit for bit where halves only
    move (copy, merge)."""
    k = catalog.build_config(cfg)
    text = emit(k)
    assert gpu_device.extensions(text) == (False, False) and "vec4<f16>" not in text
    halves = [b for b in k.bindings if b.data == f16]
    assert halves and all(b.elem == Vec(2, u32) and b.host_values == 4 for b in halves)
    if backend == "gpu":
        request.getfixturevalue("gpu")
    for case in cases_for(cfg, 3, seed=17):
        got = interp_run(k, dict(case.buffers), case.params)
        problems = [f"{case.label()} {n}: {p}" for n, _, p in case.judge(got) if p]
        assert not problems, problems
        if backend == "gpu":
            on_gpu = gpu_run(k, dict(case.buffers), case.params)
            want = {name: got[name] for name in case.expected}
            for name, _, problem in case.judge(on_gpu, want, case.tolerance, case.codes):
                assert not problem, f"{case.label()} {name}: {problem}"
            if cfg.mode in ("copy", "merge"):  # no arithmetic to contract: every bit
                for name in case.expected:
                    assert np.array_equal(on_gpu[name].view(np.uint8), got[name].view(np.uint8))


def _copy_buffers(n_halves: int, dtype=np.float16) -> dict:
    a = np.arange(1, n_halves + 1).astype(dtype)
    return {"src_k": a, "src_v": a, "present_key": a.copy(), "present_value": a.copy()}


def test_check_buffers_names_binding_and_host_dtype():
    k, _ = kernels(WORD_CONFIGS[0])
    check_buffers(k.bindings, _copy_buffers(32))
    for wrong in (np.float32, np.uint32, np.uint16):
        with pytest.raises(BufferError) as err:
            check_buffers(k.bindings, _copy_buffers(32, wrong))
        msg = str(err.value)
        assert (
            "'src_k'" in msg and "f16 data" in msg and "expected 16-bit floats (float16)" in msg
        ), msg
    bufs = _copy_buffers(32) | {"present_value": np.ones(36, np.float16)}
    with pytest.raises(BufferError, match=r"'present_value' .* 36 float16 values.*multiple of 8"):
        check_buffers(k.bindings, bufs)
    bufs = _copy_buffers(32) | {"src_v": list(range(32))}
    with pytest.raises(
        BufferError,
        match=r"'src_v' .*got a list of 32 values, expected a numpy array of 16-bit floats \(float16\)",
    ):
        check_buffers(k.bindings, bufs)


def test_extents_count_words_of_eight_halves():
    """2 rows of 16 halves = 4 words; a buffer of 3 words is too small, named in halves' words."""
    k, _ = kernels(WORD_CONFIGS[0])
    check_contract(k, _copy_buffers(32), {"count": 2})
    with pytest.raises(BufferError, match=r"'present_key' .*holds 3 elements.* touches 4"):
        check_contract(
            k, _copy_buffers(32) | {"present_key": np.ones(24, np.float16)}, {"count": 2}
        )
    assert workgroups(k, {"count": 64}) == (1, 1, 1)  # 64 rows x 2 words = 128 items, WG 256


def test_gpu_rejects_u32_arrays_for_f16_data(gpu):
    k, _ = kernels(WORD_CONFIGS[0])
    with pytest.raises(BufferError, match=r"expected 16-bit floats \(float16\)"):
        gpu_run(k, _copy_buffers(32, np.uint32), {"count": 2})


@pytest.mark.parametrize("cfg", WORD_CONFIGS[::3], ids=_ids(WORD_CONFIGS[::3]))
def test_host_type_survives_a_parse(cfg):
    k, _ = kernels(cfg)
    text = emit(k)
    assert "array<vec4<u32>>; // host: f16" in text
    back = parse(text, dispatch=k.dispatch)
    assert back.bindings == k.bindings and emit(back) == text
    assert dataclasses.replace(back, name=k.name) == k


def test_a_parsed_host_comment_must_name_a_scalar():
    k, _ = kernels(WORD_CONFIGS[0])
    text = emit(k).replace("// host: f16", "// host: f17", 1)
    with pytest.raises(Exception, match="host: f17"):
        parse(text)
