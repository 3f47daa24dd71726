"""A format defined here alone (a 2-bit asymmetric one, one class) runs in every writer and
reader: dense_append, dense_build, dense_read, dense_convert, dense_retain, dense_window_shift,
paged_append, paged_read, the fused qkv modes and a session, on the interpreter and on the GPU, against the numpy reference keyed by its family and
bits; its bit width drives its code range; and every format's decoder, run alone on the
interpreter, gives the reference's values."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from kvdsl import catalog, interp
from kvdsl.harness.cases import cases_for
from kvdsl.ir import KernelBuilder, Val, f32, u32
from kvdsl.kernels.config import ConfigError
from kvdsl.kernels.dense import DenseAppendConfig, DenseBuildConfig, DenseReadConfig
from kvdsl.kernels.dense_convert import DenseConvertConfig
from kvdsl.kernels.dense_modes import DenseRetainConfig, DenseWindowShiftConfig
from kvdsl.kernels.paged import PagedAppendConfig, PagedReadConfig
from kvdsl.kernels.qkv import QkvConfig
from kvdsl.kernels.qkv_paged import PagedQkvConfig
from kvdsl.nodes import walks
from kvdsl.nodes.formats import FORMATS, Asymmetric, Format, Symmetric
from kvdsl.reference import formats as fm
from kvdsl.runtime import run
from kvdsl.session import GpuHost, InterpHost, Session, SessionError, Spec
from tests.helpers.case_outputs import assert_cases_pass
from tests.helpers.decoders import assert_decodes_as_the_reference


@dataclass(frozen=True)
class Int2Asym(Asymmetric):
    """Two bits a code over each row's ``min .. max``: codes 0 .. 3, sixteen a word."""

    name: str = "int2_asym"
    bits: int = 2


INT2 = Int2Asym()

CONFIGS = [
    DenseAppendConfig(2, 64, format=INT2, k_norm=True, rotary=True),
    DenseAppendConfig(2, 64, format=INT2, scales="side", walk="staged"),
    DenseAppendConfig(2, 64, format=INT2, rotary=True, walk="strided", split=False),
    DenseBuildConfig(2, 32, format=INT2, scales="side", rotary=True),
    DenseReadConfig(2, 64, format=INT2),
    DenseReadConfig(2, 32, format=INT2, scales="side", output_type="f16"),
    DenseConvertConfig(2, 64, source="f32", format=INT2),
    DenseConvertConfig(2, 64, source=INT2, source_scales="side", format="int8"),
    PagedAppendConfig(2, 64, format=INT2, rotary=True, page_size=16),
    PagedAppendConfig(2, 32, format=INT2, scales="side", k_norm=True, page_size=16),
    PagedReadConfig(2, 64, format=INT2, scales="side", page_size=16),
    DenseRetainConfig(2, 64, format=INT2, scales="side"),
    DenseWindowShiftConfig(2, 64, format=INT2, region="all", rotary=True),
    QkvConfig(2, 32, q_heads=4, k_norm=True, rotary=True, format=INT2),
    PagedQkvConfig(2, 32, q_heads=4, rotary=True, format=INT2, scales="side"),
]


def _id(cfg) -> str:
    return f"{cfg.mode}-{cfg.head_dim}-{cfg.scales.value}"


@pytest.mark.parametrize("cfg", CONFIGS, ids=_id)
def test_a_user_format_runs_in_every_writer_and_reader_on_the_interpreter(cfg):
    assert_cases_pass(catalog.build_config(cfg), cfg, 2, seed=7)


@pytest.mark.parametrize("cfg", CONFIGS[::2], ids=_id)
def test_a_user_format_runs_on_the_gpu(gpu, cfg):
    assert_cases_pass(catalog.build_config(cfg), cfg, 1, seed=8, run=run)


def test_a_format_is_equal_to_the_built_in_of_its_parameters():
    assert DenseAppendConfig(2, 64, format=Asymmetric("int4_asym", 4)) == DenseAppendConfig(
        2, 64, format="int4_asym"
    )
    assert DenseAppendConfig(2, 64, format=INT2).format is INT2


def test_bits_drive_the_code_range():
    """2 bits hold codes 0 .. 3 (asymmetric) or -1 .. 1 (symmetric), and each row's maximum
    reaches the top code: the scale is (max - min) / 3, never / 15."""
    assert (INT2.qmax, INT2.per_word, INT2.stats) == (3.0, 16, 2)
    assert (Asymmetric("a4", 4).qmax, Symmetric("s2", 2).qmax, Symmetric("s8", 8).qmax) == (
        15.0,
        1.0,
        127.0,
    )
    cfg = DenseAppendConfig(1, 32, format=INT2, scales="side")
    case = cases_for(cfg, 1, seed=3)[0]
    out = interp.run(catalog.build_config(cfg), dict(case.buffers), case.params)
    assert case.against_reference(out) == []
    rows = case.written["present_key"].reshape(-1, fm.row_words(INT2, 32, False))[:, 0]
    words = out["present_key"].reshape(-1, fm.row_words(INT2, 32, False))[rows]
    scales = out["present_scales"].reshape(-1, 4)[rows]
    _, codes = fm.row_fields(INT2, words, 32, inline=False)
    assert codes.max(axis=-1).tolist() == [3] * len(codes)
    assert codes.min(axis=-1).tolist() == [0] * len(codes)
    decoded = fm.dequantize_rows(INT2, words, scales[:, :2], 32, inline=False)
    span = decoded.max(axis=-1) - decoded.min(axis=-1)
    np.testing.assert_allclose(span, 3 * scales[:, 0], rtol=1e-6)


@pytest.mark.parametrize("refused", [3, 16, 0])
def test_a_format_of_a_width_no_word_divides_is_refused(refused):
    with pytest.raises(ValueError, match=f"bits={refused}: expected 1, 2, 4 or 8"):
        Asymmetric("odd", refused)


@pytest.mark.parametrize("host", ["interp", "gpu"])
def test_a_user_format_keeps_its_cache_over_a_session(request, host):
    if host == "gpu":
        request.getfixturevalue("gpu")
    spec = Spec(layers=1, batch=2, kv_heads=2, head_dim=16, capacity=8, format=INT2)
    s = Session(spec, GpuHost() if host == "gpu" else InterpHost(), seed=5)
    s.prefill([3, 5])
    s.decode()
    s.merge(1)
    s.decode()
    got = s.read()
    assert s.checks == len(s.steps)
    # The read-back rows are the cache's own words, decoded; the session's checks held those
    # words to the oracle's (exactly on the interpreter; on a GPU, a scale an ulp or two apart,
    # as NVIDIA's f32 division gives, and a code a step).
    live = s.layers[0]
    words = s._live(s._cache(live, live.live)[0])
    if host == "interp":
        assert np.array_equal(words, live.model_k.reshape(words.shape), equal_nan=True)
    want_k = s.fmt.decode(words.reshape(-1, s.fmt.unit), 0).reshape(got[0][0].shape)
    if host == "gpu":  # lo + q * scale may be one fma on a GPU
        np.testing.assert_allclose(got[0][0], want_k, rtol=2e-7, atol=1e-6)
    else:
        assert np.array_equal(got[0][0], want_k, equal_nan=True)
    assert not np.isnan(got[0][0][:, :, :3]).any()


def decoder_kernel(fmt: Format, d: int, inline: bool):
    """``out[r * d + e]``: element ``e`` of stored row ``r``, by ``fmt.decode`` alone."""
    kb = KernelBuilder("decode", 64)
    rows = kb.binding("rows", u32, "read")
    side = None if inline else kb.binding("side", f32, "read")
    out = kb.binding("out", f32, "read_write")
    count = kb.param("count")
    it = walks.vectors(kb, 65535, count, kb.const("D", u32, d), 1)
    row_words = fmt.row_words(d, inline)

    def load(w: Val) -> Val:
        return rows[it.row * row_words + w]

    def stat(i: int) -> Val:
        return side[it.row * fmt.stats + i]

    out[it.e] = fmt.decode(kb, "x", load, it.d, stat, inline)
    return kb.build(walks.dispatch(count, d, 64, 65535, blocks=False), "decode")


DECODED = [(f, True) for f in [*FORMATS.values(), INT2]] + [
    (f, False) for f in [*FORMATS.values(), INT2] if not f.ggml
]


@pytest.mark.parametrize("fmt,inline", DECODED, ids=lambda v: str(v))
def test_every_decoder_gives_the_references_values(fmt, inline):
    assert_decodes_as_the_reference(decoder_kernel(fmt, 64, inline), fmt, inline, 64)


def test_a_user_formats_row_length_is_checked_by_its_width():
    with pytest.raises(
        ConfigError, match="^head_dim=40: expected a multiple of 16 for format 'int2_asym'$"
    ):
        DenseAppendConfig(2, 40, format=INT2)
    with pytest.raises(
        SessionError, match="^head_dim=24: expected a multiple of 16 for format 'int2_asym'$"
    ):
        Spec(head_dim=24, format=INT2)
