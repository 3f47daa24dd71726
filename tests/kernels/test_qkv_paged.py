"""kvdsl.kernels.qkv_paged: the fused QKV kernel into a paged cache against the numpy reference
(interpreter and GPU), against the unfused chain of kvdsl's own kernels (transpose, build,
paged_append) bit for bit (interpreter and GPU), the bytes it moves against index.json's
``bytes_moved``, poisoned pools, and the configs' refusals."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import catalog, interp
from kvdsl.contract import buffer_sizes, entry, evaluate
from kvdsl.harness import cases_for, verify_variant
from kvdsl.harness.qkv_paged import unfused
from kvdsl.ir.features import limits
from kvdsl.kernels.config import ConfigError
from kvdsl.kernels.qkv import qkv
from kvdsl.kernels.qkv_paged import PagedQkvConfig, bytes_moved, contract_fields
from tests.helpers.cache_kernels import assert_same_bits, bits, fused_and_chained

CATALOG = {n: c for n, c in catalog.VARIANTS.items() if c.mode == "paged_qkv"}

#: Small shapes over the axes: both addressings, NHD and HND, separate and combined pools, page
#: sizes, f32 and f16, the norms, the bias, partial rotary, BSH Q, dense formats inline and in
#: scale_pages, the quantiser's walks.
CONFIGS = {
    "slots_f32_rotary": PagedQkvConfig(2, 16, q_heads=4, rotary=True),
    "slots_plain": PagedQkvConfig(2, 8, q_heads=2),
    "table_knorm_hnd": PagedQkvConfig(
        2, 32, q_heads=8, k_norm=True, rotary=True, addressing="page_table", page_layout="hnd"
    ),
    "table_f16_combined": PagedQkvConfig(
        1,
        16,
        q_heads=4,
        q_norm=True,
        rotary=True,
        input_type="f16",
        present_type="f16",
        q_type="f16",
        addressing="page_table",
        pool="combined",
        page_size=32,
    ),
    "slots_partial_bias_bsh": PagedQkvConfig(
        2, 24, q_heads=4, bias=True, rotary=True, rotary_half=4, q_layout="bsh"
    ),
    "slots_int8_norms": PagedQkvConfig(
        2, 32, q_heads=4, q_norm=True, k_norm=True, rotary=True, format="int8"
    ),
    "table_int4_side_hnd": PagedQkvConfig(
        2,
        32,
        q_heads=4,
        rotary=True,
        format="int4",
        scales="side",
        addressing="page_table",
        page_layout="hnd",
    ),
    "table_q8_0_bias": PagedQkvConfig(
        1, 32, q_heads=2, bias=True, rotary=True, format="q8_0", addressing="page_table"
    ),
    "slots_q4_0_f16_unsplit": PagedQkvConfig(
        1, 64, q_heads=2, k_norm=True, rotary=True, format="q4_0", input_type="f16", split=False
    ),
    "slots_int4_asym_strided": PagedQkvConfig(
        2, 32, q_heads=2, format="int4_asym", walk="strided", page_size=64
    ),
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_kernel_matches_the_reference(name, gpu):
    """Interpreter against the reference, GPU against the interpreter, on every case kind
    (decode, a few tokens, a prefill; skipped slots, released pages, right padding)."""
    cfg = CONFIGS[name]
    result = verify_variant(name, cfg, qkv(cfg), n_cases=6, seed=11)
    assert result.ok, "\n".join(result.problems)
    assert result.unsupported is None


@pytest.mark.parametrize("backend", ["interp", "gpu"])
@pytest.mark.parametrize("name", sorted(CATALOG) + sorted(CONFIGS))
def test_fused_equals_the_unfused_chain(name, backend, gpu):
    """The second oracle: Q and the pools equal, bit for bit, what kvdsl's own kernels give in
    sequence (transpose, Q's and K's build, paged_append through the same slots or page
    table), poisoned rows included. With a dense format and a norm the sums of squares run in
    other orders (the quantiser's runs against build's vectors): Q within the float
    tolerance, quantised K as the case judges it (codes by one step)."""
    from kvdsl.runtime import run as gpu_run

    cfg = CATALOG.get(name) or CONFIGS[name]
    run = interp.run if backend == "interp" else gpu_run
    for case, fused, chained in fused_and_chained(cfg, qkv(cfg), unfused, run):
        for out in fused:
            if cfg.format is not None and (
                (out == "q_out" and cfg.q_norm) or (out != "q_out" and cfg.k_norm)
            ):
                want = {out: chained[out]}
                for n, _, problem in case.judge({out: fused[out]}, want):
                    assert not problem, f"{case.label()} {n}: {problem}"
                continue
            assert_same_bits(case, out, fused[out], chained[out])


@pytest.mark.parametrize("name", ["slots_f32_rotary", "table_f16_combined", "slots_int8_norms"])
def test_skipped_tokens_and_unwritten_pages_keep_the_poison(name):
    """Every pool element outside the rows of the tokens that land keeps its poison (pages
    not addressed, rows of skipped slots, released pages, right padding), and a write there is
    caught, as is one changed element of Q and of each pool."""
    cfg = CONFIGS[name]
    kernel = qkv(cfg)
    for case in cases_for(cfg, 3, seed=3):
        got = interp.run(kernel, dict(case.buffers), case.params)
        assert not case.against_reference(got)
        for out, mask in case.written.items():
            untouched = ~mask.reshape(-1)
            assert untouched.any() and mask.any(), out
            assert (bits(got[out])[untouched] == bits(case.buffers[out])[untouched]).all()
            bad = {k: v.copy() for k, v in got.items()}
            bad[out][np.flatnonzero(untouched)[0]] = 1
            assert case.against_reference(bad), out
        bad = {k: v.copy() for k, v in got.items()}
        bad["q_out"][len(bad["q_out"]) // 2] += 1
        assert case.against_reference(bad)


#: The bindings a dispatch streams through once (the rest are tables every head reads again).
STREAMS = ("qkv", "q_out", "key_pages", "value_pages", "kv_pages", "scale_pages")


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_bytes_moved_within_a_tenth_of_the_minimum(name):
    """The kernel's loads and stores, counted by the interpreter, at a decode step (batch 4,
    one token) and a prefill (batch 2, 24 tokens), every token landing: the streamed bindings'
    bytes are at most 1.1x index.json's ``bytes_moved``, each element of the stream loaded or
    stored once."""
    cfg = CATALOG[name]
    kernel = catalog.build(name)
    e = entry(kernel, cfg)
    assert e["bytes_moved"] == bytes_moved(cfg) == contract_fields(cfg)["bytes_moved"]
    assert e["pages"]["page_size"] == cfg.page_size
    rng = np.random.default_rng(0)
    p = cfg.page_size
    for batch, key_seq in ((4, 1), (2, 24)):
        case = cases_for(cfg, 1, seed=0)[0]
        bufs = dict(case.buffers)
        tokens = batch * key_seq
        pages = batch * (-(-(key_seq + 3) // p))
        x = rng.standard_normal(tokens * cfg.heads * cfg.head_dim).astype(bufs["qkv"].dtype)
        bufs["qkv"] = x
        shape = {"batch": batch, "keySeq": key_seq, "pages": pages, "positions": 64}
        params = {"count": tokens * cfg.rows, "keySeq": key_seq}
        if cfg.addressing.value == "page_table":
            per = pages // batch
            bufs["seqlens_k"] = np.full(batch, key_seq + 2, np.int32)
            bufs["page_table"] = rng.permutation(pages).astype(np.int32)
            params["maxPages"] = shape["maxPages"] = per
        else:
            bufs["slot_mapping"] = rng.permutation(pages * p)[:tokens].astype(np.int32)
            if cfg.rotary:
                bufs["token_positions"] = np.arange(tokens, dtype=np.int32) % 60
        sizes = buffer_sizes(e, shape)
        host = {b.name: b.host.dtype for b in kernel.bindings}
        for k in STREAMS[1:]:
            if k in host:
                bufs[k] = np.zeros(sizes[k] // host[k].itemsize, host[k])
        if cfg.rotary:
            bufs["rotary_table"] = np.ones(sizes["rotary_table"] // 4, np.float32)
        counted: dict[str, list[int]] = {}
        interp.run(kernel, bufs, params, accesses=counted)
        minimum = evaluate(e["bytes_moved"], {"batch": batch, "keySeq": key_seq}, "shape")
        size = {"f32": 4, "f16": 2}
        # Rotary partners loaded again (pair_loads) come from the cache (qkv's test says so).
        reloads = tokens * cfg.reloads * size[cfg.input_type.value]
        exact = tokens * cfg.heads * cfg.head_dim * size[cfg.input_type.value]
        assert counted["qkv"][0] - reloads >= exact
        streamed = sum(sum(counted.get(k, [0])) for k in STREAMS) - reloads
        assert streamed <= 1.1 * minimum, (streamed, minimum)
        q_bytes = tokens * cfg.q_heads * cfg.head_dim * size[cfg.q_type.value]
        assert counted["q_out"] == [0, q_bytes]
        stored = sum(counted[k][1] for k in STREAMS[2:] if k in counted)
        assert stored == tokens * 2 * cfg.kv_heads * cfg.cache_row_bytes


def test_catalog_variants_bind_at_most_eight_storage_buffers():
    for name, cfg in CATALOG.items():
        kernel = catalog.build(name)
        assert limits(kernel) == {} and len(kernel.bindings) == cfg.storage_buffers, name
    full = {"q_norm": True, "k_norm": True, "rotary": True, "addressing": "page_table"}
    assert len(qkv(PagedQkvConfig(8, 128, q_heads=32, **full, format="int8")).bindings) == 8
    with pytest.raises(ConfigError) as err:  # a ninth: side scales
        PagedQkvConfig(8, 128, q_heads=32, **full, format="int8", scales="side")
    assert err.value.field == "scales"
    with pytest.raises(ConfigError) as err:  # a ninth: the bias, f32 in two pools
        PagedQkvConfig(8, 128, q_heads=32, **full, bias=True)
    assert err.value.field == "pool"
    assert (
        len(qkv(PagedQkvConfig(8, 128, q_heads=32, **full, bias=True, pool="combined")).bindings)
        == 8
    )


@pytest.mark.parametrize(
    "fields, field",
    [
        ({"page_size": 8}, "page_size"),
        ({"page_size": 24}, "page_size"),
        ({"page_layout": "nhsd"}, "page_layout"),
        ({"pool": "shared"}, "pool"),
        ({"addressing": "positions"}, "addressing"),
        ({"format": "int8", "pool": "combined"}, "pool"),
        ({"window": True}, "window"),
        ({"q_heads": 6}, "q_heads"),
        ({"format": "q8_0", "walk": "strided"}, "walk"),
    ],
)
def test_config_refusals_name_the_field(fields, field):
    args = {"kv_heads": 4, "head_dim": 32, "q_heads": 8} | fields
    with pytest.raises(ConfigError) as err:
        PagedQkvConfig(**args)
    assert err.value.field == field
