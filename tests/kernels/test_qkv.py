"""kvdsl.kernels.qkv: the fused QKV kernel against the numpy reference (interpreter and GPU),
against the unfused chain of kvdsl's own kernels bit for bit (interpreter and GPU), the bytes
it moves against index.json's ``bytes_moved``, and the configs' refusals."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import catalog, interp
from kvdsl.contract import buffer_sizes, entry, evaluate
from kvdsl.harness import cases_for, verify_variant
from kvdsl.harness.qkv import TOLERANCE, inputs, unfused
from kvdsl.ir.features import limits
from kvdsl.kernels.config import ConfigError
from kvdsl.kernels.qkv import QkvConfig, bytes_moved, contract_fields, qkv
from kvdsl.reference.judge import compare
from tests.helpers.cache_kernels import assert_same_bits, fused_and_chained

CATALOG = {n: c for n, c in catalog.VARIANTS.items() if c.mode == "qkv"}

#: Small shapes over every axis: GQA 1, 4 and 8; each norm alone and both; bias with a norm;
#: partial rotary with and without a norm; f16 in any of the three places; Q in BSH.
CONFIGS = {
    "mha_rotary": QkvConfig(2, 16, q_heads=2, rotary=True),
    "gqa4_knorm": QkvConfig(2, 32, q_heads=8, k_norm=True, rotary=True),
    "gqa8_qnorm_bsh": QkvConfig(1, 16, q_heads=8, q_norm=True, rotary=True, q_layout="bsh"),
    "gqa4_norms_bias": QkvConfig(1, 24, q_heads=4, q_norm=True, k_norm=True, bias=True),
    "partial": QkvConfig(2, 24, q_heads=4, rotary=True, rotary_half=4),
    "partial_norms": QkvConfig(
        2, 40, q_heads=4, q_norm=True, k_norm=True, rotary=True, rotary_half=8
    ),
    "f16_in": QkvConfig(2, 16, q_heads=4, rotary=True, input_type="f16"),
    "f16_cache": QkvConfig(2, 16, q_heads=4, k_norm=True, rotary=True, present_type="f16"),
    "f16_q_bsh": QkvConfig(1, 32, q_heads=4, bias=True, rotary=True, q_type="f16", q_layout="bsh"),
    "plain": QkvConfig(2, 8, q_heads=2),
    "int8": QkvConfig(2, 32, q_heads=4, rotary=True, format="int8"),
    "int4_asym_side_knorm": QkvConfig(
        2, 32, q_heads=8, k_norm=True, format="int4_asym", scales="side"
    ),
    "q8_0_qnorm_bias": QkvConfig(
        1, 32, q_heads=4, q_norm=True, bias=True, rotary=True, format="q8_0"
    ),
    "q4_0_f16_norms_bsh": QkvConfig(
        1,
        64,
        q_heads=2,
        q_norm=True,
        k_norm=True,
        rotary=True,
        format="q4_0",
        input_type="f16",
        q_type="f16",
        q_layout="bsh",
    ),
    "int4_plain": QkvConfig(2, 16, q_heads=2, format="int4"),
    # rows of 6 vectors: the norm's partials in one scalar chain beside the quantiser's
    "int8_knorm_d24": QkvConfig(1, 24, q_heads=2, k_norm=True, format="int8"),
    # the quantiser's other walks: strided with the partners loaded again, a ggml row's
    # partners loaded again, K and V rows together in runs and staged
    "int8_strided_pair_loads": QkvConfig(
        2, 32, q_heads=4, k_norm=True, rotary=True, format="int8", walk="strided", pair_loads=True
    ),
    "q4_0_pair_loads_bias": QkvConfig(
        1, 64, q_heads=2, k_norm=True, bias=True, rotary=True, format="q4_0", pair_loads=True
    ),
    "q8_0_unsplit_runs": QkvConfig(
        1, 32, q_heads=4, q_norm=True, rotary=True, format="q8_0", split=False, walk="runs"
    ),
    "int4_unsplit_staged": QkvConfig(
        2, 32, q_heads=8, rotary=True, format="int4", walk="staged", split=False
    ),
    # Q rows in the quantiser's runs (not strided), with a Q norm; a ggml row's likewise
    "int8_q_runs": QkvConfig(
        2, 32, q_heads=4, q_norm=True, rotary=True, format="int8", q_strided=False
    ),
    "q8_0_q_runs_pair_loads": QkvConfig(
        1, 32, q_heads=2, rotary=True, format="q8_0", q_strided=False, pair_loads=True
    ),
    # strided lanes whose partners are staged (each vector at its place in the row), K normed;
    # Q's rows in the quantiser's strided words too
    "int4_strided_staged": QkvConfig(
        2, 64, q_heads=4, k_norm=True, rotary=True, format="int4", walk="strided", pair_loads=False
    ),
    "int4_strided_staged_q_words": QkvConfig(
        2,
        64,
        q_heads=4,
        k_norm=True,
        rotary=True,
        format="int4",
        walk="strided",
        pair_loads=False,
        q_strided=False,
    ),
}


@pytest.mark.parametrize("name", CONFIGS)
def test_kernel_matches_the_reference(name, gpu):
    """Interpreter against the reference, GPU against the interpreter, on every case kind
    (decode, a few tokens, a whole cache; every adversarial seqlens_k)."""
    cfg = CONFIGS[name]
    result = verify_variant(name, cfg, qkv(cfg), n_cases=6, seed=11)
    assert result.ok, "\n".join(result.problems)
    assert result.unsupported is None


@pytest.mark.parametrize(
    "name", ["mha_rotary", "gqa4_norms_bias", "partial", "f16_cache", "int8", "int4_plain"]
)
def test_a_wrong_output_is_caught(name):
    """One element changed in each output, or one cache row written outside the window, fails
    the case's verdict."""
    cfg = CONFIGS[name]
    for case in cases_for(cfg, 3, seed=2):
        got = interp.run(qkv(cfg), dict(case.buffers), case.params)
        assert not case.against_reference(got)
        for out in ("q_out", "present_key", "present_value"):
            bad = {k: v.copy() for k, v in got.items()}
            if bad[out].dtype == np.uint32:  # a dense cache's words: flip a code's top bit
                inside = np.flatnonzero(case.written[out])
                bad[out][inside[-1]] ^= np.uint32(0x80000000)
                assert case.against_reference(bad), out
                continue
            inside = np.flatnonzero(case.written.get(out, np.ones(bad[out].size, bool)))
            bad[out][inside[len(inside) // 2]] += 1
            assert case.against_reference(bad), out
        outside = np.flatnonzero(~case.written["present_value"])
        if outside.size:
            bad = {k: v.copy() for k, v in got.items()}
            bad["present_value"][outside[0]] = 1
            assert case.against_reference(bad)


@pytest.mark.parametrize("backend", ["interp", "gpu"])
@pytest.mark.parametrize(
    "name",
    sorted(CATALOG)
    + ["gqa4_knorm", "partial", "f16_q_bsh", "int4_asym_side_knorm", "q8_0_qnorm_bias"]
    + ["int8_strided_pair_loads", "q4_0_pair_loads_bias", "q8_0_unsplit_runs"]
    + ["int4_unsplit_staged", "int8_q_runs", "q8_0_q_runs_pair_loads"]
    + ["int4_strided_staged", "int4_strided_staged_q_words"],
)
def test_fused_equals_the_unfused_chain(name, backend, gpu):
    """The second oracle: the fused kernel's Q and cache equal, bit for bit, what kvdsl's own
    kernels give in sequence (transpose, build, build with K RMSNorm, merge_share append; with
    a dense format dense_append), poisoned rows included. Both sum a row's squares in the
    same order (the pair walk's), but with a format: a normed Q (build sums by vectors) within
    the float tolerance, and K with K RMSNorm (dense_append sums in its format's walk) as the
    case judges quantised K."""
    from kvdsl.runtime import run as gpu_run

    cfg = CATALOG.get(name) or CONFIGS[name]
    run = interp.run if backend == "interp" else gpu_run
    for case, fused, chained in fused_and_chained(cfg, qkv(cfg), unfused, run):
        for out in fused:
            if out == "q_out" and cfg.format is not None and cfg.q_norm:
                # The quantising walk sums a Q row's squares by the quantiser's runs of
                # vectors, build by vectors: the same terms in another order.
                tol = TOLERANCE[cfg.q_type.value]
                _, problem = compare(fused[out], chained[out], tol)
                assert not problem, f"{case.label()} {out}: {problem}"
                continue
            if out in ("present_key", "present_scales") and cfg.format is not None and cfg.k_norm:
                # dense_append sums a K row's squares in its own walk's order (the format's
                # default walk), the fused kernel in the quantiser's runs: K's codes may move
                # one step in a few elements and its scales by an ulp, as the case judges them.
                want = {k: v for k, v in chained.items() if k == out}
                for name, _, problem in case.judge({out: fused[out]}, want):
                    assert not problem, f"{case.label()} {name}: {problem}"
                continue
            assert_same_bits(case, out, fused[out], chained[out])


#: The bindings a dispatch streams through once (the rest are tables every head reads again,
#: from the cache after the first read).
STREAMS = ("qkv", "q_out", "present_key", "present_value", "present_scales")


def _pos(cfg: QkvConfig, cap: int) -> dict[str, int]:
    return {"positions": cap} if cfg.rotary else {}


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_bytes_moved_within_a_tenth_of_the_minimum(name):
    """The kernel's loads and stores, every one counted by the interpreter, at a decode step
    (batch 4, one token) and a prefill (batch 2, 24 tokens): the streamed bindings' bytes are
    at most 1.1x index.json's ``bytes_moved`` (they are its terms exactly: each element loaded
    or stored once), and the tables' entries, each counted once, are the rest of it. The
    tables (seqlens_k, the norm weights, the rotary rows, the bias) are read again by every
    head of a token; those repeats are not counted: they come from the cache."""
    cfg = CATALOG[name]
    kernel = catalog.build(name)
    e = entry(kernel, cfg)
    assert e["bytes_moved"] == bytes_moved(cfg) == contract_fields(cfg)["bytes_moved"]
    for batch, key_seq, cap in ((4, 1, 40), (2, 24, 32)):
        bufs, _ = inputs(cfg, np.random.default_rng(0), batch, key_seq, cap, 1)
        sizes = buffer_sizes(e, {"batch": batch, "seq": cap, "keySeq": key_seq} | _pos(cfg, cap))
        host = {b.name: b.host.dtype for b in kernel.bindings}
        for k in STREAMS[1:]:
            if k in host:
                bufs[k] = np.zeros(sizes[k] // host[k].itemsize, host[k])
        bufs = {k: np.ascontiguousarray(v).reshape(-1) for k, v in bufs.items()}
        params = {"count": batch * key_seq * cfg.rows, "keySeq": key_seq, "seq": cap}
        counted: dict[str, list[int]] = {}
        interp.run(kernel, bufs, params, accesses=counted)
        minimum = evaluate(e["bytes_moved"], {"batch": batch, "keySeq": key_seq}, "shape")
        size = {"f32": 4, "f16": 2}
        d, tokens = cfg.head_dim, batch * key_seq
        # A rotated row's partners loaded again (pair_loads) come from the cache: the lines the
        # row's lanes have just loaded. A Walsh-Hadamard rotation loads nothing again.
        reloads = tokens * cfg.reloads * size[cfg.input_type.value]
        streamed = sum(sum(counted.get(k, [0])) for k in STREAMS) - reloads
        assert streamed <= 1.1 * minimum, (streamed, minimum)
        # Each streamed element moves once: the input's loads and the outputs' stores.
        # Past the last row, the last workgroup's lanes load a copy of the last row (a kernel
        # with a barrier cannot return before it): those loads are the cache's.
        exact = tokens * cfg.heads * d * size[cfg.input_type.value]
        per_lane = 2 if cfg.fmt is None else 2 * cfg.quantiser.vectors  # vec4 of the input
        lanes = cfg.pairs if cfg.fmt is None else cfg.quantiser.lanes
        items = params["count"] * lanes
        past = -(-items // cfg.workgroup_size) * cfg.workgroup_size - items
        clamped = past * per_lane * 4 * size[cfg.input_type.value] if cfg.norm or cfg.fmt else 0
        loaded = counted["qkv"][0] - reloads
        assert exact <= loaded <= exact + 2 * clamped and counted["qkv"][1] == 0
        q_bytes = tokens * cfg.q_heads * d * size[cfg.q_type.value]
        assert counted["q_out"] == [0, q_bytes]
        row = cfg.head_dim * size[cfg.present_type.value] if cfg.fmt is None else cfg.row_words * 4
        kv = tokens * cfg.kv_heads * row
        assert counted["present_key"] == counted["present_value"] == [0, kv]
        if not cfg.inline:
            assert counted["present_scales"] == [0, tokens * cfg.kv_heads * 2 * cfg.fmt.stats * 4]
        # The rest of the minimum is the tables' entries, each counted once.
        assert minimum - (streamed - (loaded - exact)) == _table_bytes(cfg, batch, key_seq)
        reads = sum(counted[k][0] for k in counted if k not in STREAMS)
        print(f"{name} B={batch} S={key_seq}: streamed {streamed} of {minimum} B, tables read"
              f" {reads} B (per head, from the cache)")  # fmt: skip


def _table_bytes(cfg: QkvConfig, batch: int, key_seq: int) -> int:
    """The tables' bytes, each entry a dispatch uses once."""
    out = batch * 4 + cfg.norm_weights * 4
    out += batch * key_seq * 2 * cfg.half * 4 if cfg.rotary else 0
    return out + (cfg.heads * cfg.head_dim * 4 if cfg.bias else 0)


def test_the_accesses_of_a_copy_are_its_bytes():
    """The interpreter's access count on a kernel whose traffic is known: a flat copy."""
    cfg = catalog.config("copy_llama31_8b")
    kernel = catalog.build("copy_llama31_8b")
    rows = 37
    bufs = {k: np.ones(rows * 128, np.float32) for k in ("src_k", "src_v")}
    bufs |= {k: np.zeros(rows * 128, np.float32) for k in ("present_key", "present_value")}
    counted: dict[str, list[int]] = {}
    interp.run(kernel, bufs, {"count": rows}, accesses=counted)
    assert cfg.mode == "copy"
    n = rows * 128 * 4
    assert counted == {
        "src_k": [n, 0],
        "src_v": [n, 0],
        "present_key": [0, n],
        "present_value": [0, n],
    }


def test_catalog_variants_bind_at_most_eight_storage_buffers():
    for name in CATALOG:
        assert limits(catalog.build(name)) == {}, name
    full = QkvConfig(8, 128, q_heads=32, q_norm=True, k_norm=True, bias=True, rotary=True)
    assert len(qkv(full).bindings) == 8 and limits(qkv(full)) == {}
    side = {"rotary": True, "bias": True, "format": "int8", "scales": "side"}
    assert len(qkv(QkvConfig(8, 128, q_heads=32, **side)).bindings) == 8
    with pytest.raises(ConfigError) as err:  # a ninth: side scales with a norm too
        QkvConfig(8, 128, q_heads=32, k_norm=True, **side)
    assert err.value.field == "scales"


def test_catalog_names_the_models_own_transforms():
    assert CATALOG["qkv_qwen3_06b"].q_norm and CATALOG["qkv_qwen3_06b"].k_norm
    assert CATALOG["qkv_gemma3_1b"].q_heads == 4 and CATALOG["qkv_gemma3_1b"].kv_heads == 1
    assert CATALOG["qkv_qwen25_05b"].bias and CATALOG["qkv_qwen25_05b"].q_heads == 14
    assert CATALOG["qkv_llama31_8b"].q_heads == 32 and CATALOG["qkv_phi3_mini"].q_heads == 32
    assert all(c.rotary for n, c in CATALOG.items() if "norotary" not in n)


@pytest.mark.parametrize("name", sorted(CONFIGS) + sorted(CATALOG))
def test_workgroup_bytes_are_the_kernels(name):
    """The config's count of workgroup memory (what it checks against WebGPU's default) is
    what the kernel declares."""
    from kvdsl.ir.memtypes import workgroup_bytes

    cfg = CONFIGS.get(name) or CATALOG[name]
    kernel = qkv(cfg)
    assert cfg.workgroup_bytes() == sum(workgroup_bytes(w.ty) for w in kernel.workgroup_vars)


@pytest.mark.parametrize(
    "fields, field",
    [
        ({"q_heads": 6}, "q_heads"),  # not a multiple of kv_heads = 4
        ({"q_heads": 0}, "q_heads"),
        ({"head_dim": 12}, "head_dim"),  # not a multiple of 8
        ({"rotary": True, "rotary_half": 6}, "rotary_half"),  # not a multiple of 4
        ({"rotary_half": 4}, "rotary_half"),  # without rotary
        ({"q_norm": 1}, "q_norm"),
        ({"bias": "yes"}, "bias"),
        ({"eps": 0.0}, "eps"),
        ({"input_type": "i32"}, "input_type"),
        ({"present_type": "int8"}, "present_type"),
        ({"q_type": "u32"}, "q_type"),
        ({"q_layout": "nhsd"}, "q_layout"),
        ({"window": True}, "window"),
        ({"k_norm": True, "workgroup_size": 102}, "workgroup_size"),  # rows of 4 pairs
        ({"format": "int8", "workgroup_size": 37}, "workgroup_size"),  # rows of 2 lanes
        ({"format": "int3"}, "format"),
        ({"format": "q8_0", "scales": "side"}, "scales"),
        ({"scales": "side"}, "scales"),  # no format: no scales
        ({"format": "int8", "present_type": "f16"}, "present_type"),
        ({"format": "q4_0", "head_dim": 16}, "head_dim"),  # ggml blocks of 32
        ({"format": "int8", "rotary": True, "rotary_half": 6}, "rotary_half"),
        ({"walk": "runs"}, "walk"),  # no format
        ({"split": False}, "split"),
        ({"pair_loads": True}, "pair_loads"),
        ({"format": "q8_0", "walk": "strided"}, "walk"),
        ({"format": "int8", "walk": "rows"}, "walk"),
        ({"format": "int8", "run": 3}, "run"),
        ({"format": "int8", "split": "no"}, "split"),
        ({"format": "int8", "q_strided": 1}, "q_strided"),
        (
            {
                "format": "q8_0",
                "k_norm": True,
                "rotary": True,
                "pair_loads": False,
                "workgroup_size": 240,
            },
            "workgroup_size",
        ),
    ],
)
def test_config_refusals_name_the_field(fields, field):
    args = {"kv_heads": 4, "head_dim": 32, "q_heads": 8} | fields
    with pytest.raises(ConfigError) as err:
        QkvConfig(**args)
    assert err.value.field == field
