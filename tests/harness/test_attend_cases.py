"""The verification cases of ``attend`` and ``attend_merge`` (kvdsl/harness/attend.py): their
float64 partials mean the reference, a host's two dispatches (attend, then the merge the
catalog names for it) give the reference on the interpreter, the cases cover the shapes they
claim, and planted bugs fail them."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from kvdsl import catalog, interp
from kvdsl.emit import emit
from kvdsl.frontend import parse
from kvdsl.harness import cases_for
from kvdsl.harness.attend import Problem, merged, partials
from kvdsl.ir.features import limits
from kvdsl.kernels.attend import HIDDEN
from kvdsl.catalog.attend import merge_of

ATTEND = [n for n, cfg in catalog.VARIANTS.items() if cfg.mode == "attend"]


def _first_per_merge() -> list[str]:
    """The first attend variant of each merge variant."""
    seen: dict[str, str] = {}
    for name in ATTEND:
        seen.setdefault(merge_of(name, catalog.VARIANTS), name)
    return sorted(seen.values())


def test_every_attend_variant_has_its_merge():
    merges = {merge_of(name, catalog.VARIANTS) for name in ATTEND}
    assert merges == {n for n, cfg in catalog.VARIANTS.items() if cfg.mode == "attend_merge"}
    assert 40 <= len(ATTEND) + len(merges) <= 50


def test_attend_variants_run_at_the_default_limits():
    """No attend variant needs a limit past WebGPU's defaults (its workgroup memory included),
    so any host's device runs them."""
    for name, cfg in catalog.VARIANTS.items():
        if cfg.mode.startswith("attend"):
            assert limits(catalog.build(name)) == {}, name


@pytest.mark.parametrize("window,softcap,sinks", [(None, None, False), (7, 3.0, True)])
def test_partials_merge_to_the_reference(window, softcap, sinks):
    """Split at any chunk (empty chunks past the keys included), the float64 partials merge to
    the reference's output; each chunk's maximum is its visible keys' largest logit."""
    rng = np.random.default_rng(3)
    lengths = np.array([40, 9, 23])
    q, k, v = (rng.standard_normal(s) for s in ((3, 8, 3, 16), (3, 2, 40, 16), (3, 2, 40, 16)))
    sink = rng.standard_normal(8) if sinks else None
    p = Problem(q, k, v, lengths, 0.3, window=window, softcap=softcap, sinks=sink)
    want = p.reference()
    for chunk, chunks in [(40, 1), (7, 6), (5, 10), (16, 4)]:
        parts = partials(p, chunk, chunks)
        np.testing.assert_allclose(merged(parts, sink), want, rtol=1e-12, atol=1e-12)
    parts = partials(p, 5, 10)
    assert np.all(parts[..., 8:, -4] == HIDDEN)  # chunks 8 and 9 start past every key
    assert np.all(parts[..., 8:, :-4] == 0) and np.all(parts[..., 8:, -3:] == 0)


@pytest.mark.parametrize("name", _first_per_merge())
def test_attend_then_merge_give_the_reference(name):
    """A case with several chunks run as a host runs it on the interpreter: the attend variant
    writes partials, the merge variant the catalog names for it turns them into the output."""
    case = cases_for(catalog.config(name), 2, 11)[1]
    assert case.params["chunks"] > 1
    got = interp.run(catalog.build(name), dict(case.buffers), case.params)
    merge = merge_of(name, catalog.VARIANTS)
    inputs = {"partials": got["partials"], "output": case.buffers["output"]}
    if "sinks" in case.buffers:
        inputs["sinks"] = case.buffers["sinks"]
    keep = {k: case.params[k] for k in ("batch", "queries", "chunks")}
    out = interp.run(catalog.build(merge), inputs, keep)["output"]
    assert not np.isnan(out.astype(np.float64)).any()
    cfg = catalog.config(name)
    want = case.attention
    if cfg.o_layout.value == "bsh":
        want = want.transpose(0, 2, 1, 3)
    tol = case.tolerance["output"]
    np.testing.assert_allclose(out.astype(np.float64), want.reshape(-1), rtol=tol, atol=tol)


def test_the_cases_cover_the_shapes():
    """Over six cases of a variant: one and several chunks (an empty one among them), 1 and
    max_queries new tokens, sequences of different lengths; paged pools hold NaN where no
    table points."""
    for name in ("attend_spec_window_sinks_gpt_oss_20b", "attend_paged_p16_nhd_llama31_8b"):
        cfg = catalog.config(name)
        cases = cases_for(cfg, 6, 2)
        assert {c.params["queries"] for c in cases} >= {1, cfg.max_queries}
        assert {c.params["chunks"] == 1 for c in cases} == {True, False}
        assert any(
            c.params["chunk"] * (c.params["chunks"] - 1) >= c.problem.lengths.max() for c in cases
        )
        assert any(len(set(c.problem.lengths)) > 1 for c in cases)
        for c in cases:
            assert np.all(c.problem.lengths >= c.params["queries"])
            assert np.all(c.buffers["seqlens_k"] == c.problem.lengths - 1)
            outputs = [c.buffers["output"].astype(np.float64), c.buffers["partials"]]
            assert all(np.isnan(o).all() for o in outputs)  # poisoned
            if "key_pages" in c.buffers:
                assert np.isnan(c.buffers["key_pages"]).any()


QUANTISED = [n for n in ATTEND if catalog.config(n).format is not None]
#: Each quantised attend variant (but int4 in HND pages of 64, which no writer variant names)
#: and a writer (or, for int4_asym's HND pages, reader) variant of the same cache.
WRITERS = {
    "attend_int8_llama31_8b": "dense_append_int8_llama31_8b",
    "attend_int8_side_llama31_8b": "dense_append_int8_side_llama31_8b",
    "attend_int4_llama31_8b": "dense_append_int4_llama31_8b",
    "attend_int4_side_llama31_8b": "dense_append_int4_side_llama31_8b",
    "attend_int4_rotation128_llama31_8b": "qkv_int4_rotation128_llama31_8b",
    "attend_int4_asym_llama31_8b": "dense_append_int4_asym_llama31_8b",
    "attend_int4_asym_side_llama31_8b": "dense_append_int4_asym_side_llama31_8b",
    "attend_q8_0_llama31_8b": "dense_append_q8_0_llama31_8b",
    "attend_q4_0_llama31_8b": "dense_append_q4_0_llama31_8b",
    "attend_template_int8_llama31_8b": "append_quant_int8_llama31_8b",
    "attend_template_int4_llama31_8b": "append_quant_int4_llama31_8b",
    "attend_paged_int8_side_p16_nhd_llama31_8b": "paged_append_int8_side_page_table_p16_nhd_llama31_8b",
    "attend_paged_int4_p64_nhd_llama31_8b": "paged_append_rotary_int4_page_table_p64_nhd_llama31_8b",
    "attend_paged_int4_side_p16_nhd_llama31_8b": "paged_qkv_int4_side_llama31_8b",
    "attend_paged_int4_asym_side_p64_hnd_llama31_8b": "paged_read_int4_asym_side_p64_hnd_f16_llama31_8b",
    "attend_paged_q8_0_p16_nhd_llama31_8b": "paged_append_rotary_q8_0_page_table_p16_nhd_llama31_8b",
    "attend_paged_q4_0_p16_nhd_llama31_8b": "paged_qkv_q4_0_llama31_8b",
    "attend_paged_q4_0_p16_hnd_llama31_8b": "paged_append_rotary_q4_0_p16_hnd_llama31_8b",
    "attend_ort_q4_llama31_8b": "dense_append_ort_q4_llama31_8b",
    "attend_paged_ort_q4_p16_nhd_llama31_8b": "paged_append_rotary_ort_q4_page_table_p16_nhd_llama31_8b",
    "attend_kivi2_g128_llama31_8b": "kivi_flush_2bit_g128_llama31_8b",
    "attend_kivi2_g64_llama31_8b": "kivi_flush_2bit_g64_llama31_8b",
    "attend_kivi2_g32_llama31_8b": "kivi_flush_2bit_g32_llama31_8b",
    "attend_paged_kivi2_g128_p256_llama31_8b": "kivi_flush_2bit_g128_paged256_llama31_8b",
    "attend_paged_kivi2_g32_p256_llama31_8b": "kivi_flush_2bit_g32_paged256_llama31_8b",
}  # fmt: skip
#: attend's cache bindings → the writer's (contiguous; a paged pool's are named alike).
CACHE_BINDINGS = {"key": "present_key", "value": "present_value", "scales": "present_scales"}
SPLIT = ("k_scale", "v_scale")
CACHED = ("key", "value", "scales", "kv_scale", "key_pages", "value_pages", "scale_pages",
          "residual_k", "residual_v", "kivi_cache", "kivi_pages")  # fmt: skip


def test_quantised_variants_read_their_writers_caches():
    """A quantised attend variant's cache is its writer variant's: the same format, scales,
    KV heads, head dim (and page size and layout), and the contract sizes its bindings (a
    row's or a page's bytes) alike, so a host binds the writer's buffers to the reader."""
    from kvdsl.contract import entry
    from kvdsl.contract.expr import evaluate

    assert sorted(QUANTISED) == sorted([*WRITERS, "attend_paged_int4_p64_hnd_llama31_8b"])
    unit = {"batch": 1, "seq": 1, "totalSeq": 1, "pages": 1, "perChannel": 1, "maxPages": 1,
            "groups": 1}  # fmt: skip
    for name, writer in WRITERS.items():
        cfg, wcfg = catalog.config(name), catalog.config(writer)
        assert (cfg.kv_heads, cfg.head_dim) == (wcfg.kv_heads, wcfg.head_dim), name
        if cfg.kivi_bits is not None:  # KIVI's writer: its bits, group and pages
            assert (cfg.kivi_bits, cfg.kivi_group) == (wcfg.bits, wcfg.group), name
            assert (cfg.cache.value == "paged") == wcfg.paged, name
            assert not wcfg.paged or cfg.page_size == wcfg.page_size, name
        elif cfg.template_bits is None:
            assert (cfg.format_name, cfg.scales) == (wcfg.format.value, wcfg.scales), name
        else:
            assert cfg.template_bits == wcfg.bits, name
        if cfg.cache.value == "paged" and cfg.kivi_bits is None:
            assert (cfg.page_size, cfg.page_layout) == (wcfg.page_size, wcfg.page_layout), name
        if cfg.rotation:  # a rotating reader's writer rotates K over the same blocks
            assert wcfg.rotation == cfg.rotation, name
        sizes = [
            {b["name"]: evaluate(b["elements"], unit) * b["element_bytes"]
             for b in entry(catalog.build(n), catalog.config(n))["bindings"]
             if b["name"] in CACHE_BINDINGS.values() or b["name"] in CACHED + SPLIT}
            for n in (name, writer)
        ]  # fmt: skip
        if "k_scale" in sizes[1]:  # the template's k_scale and v_scale, which kv_scale pairs
            sizes[1]["kv_scale"] = sum(sizes[1][b] for b in SPLIT)
        cache = [b for b in CACHED if b in sizes[0]]
        assert cache, name
        for b in cache:
            assert sizes[0][b] == sizes[1][CACHE_BINDINGS.get(b, b)], (name, b)


@pytest.mark.parametrize("name", [n for n in QUANTISED if "paged" not in n and "kivi" not in n])
def test_a_quantised_cache_holds_the_encoders_rows(name):
    """A contiguous quantised cache holds every row of K and V as the format's reference
    encoder writes it, and the problem attends over what those rows decode to: random,
    non-constant values within a quantisation step of the case's random values."""
    from kvdsl.reference import elementwise as ew
    from kvdsl.reference import formats as fm

    cfg = catalog.config(name)
    for case in cases_for(cfg, 2, 5):
        b, t = len(case.problem.lengths), case.params["seq"]
        got = []
        for binding in ("key", "value"):
            words = case.buffers[binding].reshape(b, cfg.kv_heads, t, -1)
            if cfg.template_bits is not None:
                q = words if cfg.template_bits == 8 else ew.unpack_int4(words)
                pair = case.buffers["kv_scale"].reshape(-1, 2)[:, int(binding == "value")]
                sc = ew.channel_scales(pair, cfg.kv_heads, cfg.head_dim, case.params["perChannel"])
                got.append(ew.dequantize(q, sc))
            else:
                side = None
                if not cfg.inline:
                    both = case.buffers["scales"].reshape(b, cfg.kv_heads, t, -1)
                    half = both.shape[-1] // 2
                    side = both[..., :half] if binding == "key" else both[..., half:]
                rows = fm.dequantize_rows(cfg.fmt, words, side, cfg.head_dim, cfg.inline)
                got.append(fm.original_basis(cfg.fmt, rows))  # ort_q4 stores rows rotated
        longest = case.problem.k.shape[2]
        for dec, want in zip(got, (case.problem.k, case.problem.v)):
            np.testing.assert_array_equal(dec[:, :, :longest], want)
            assert np.isfinite(dec).all() and np.unique(dec).size > 8
            assert 0.5 < np.abs(want).mean() < 1.5  # values() are ±[0.25, 2)


@pytest.mark.parametrize(
    "name", ["attend_kivi2_g32_llama31_8b", "attend_paged_kivi2_g32_p256_llama31_8b"]
)
def test_a_kivi_cache_holds_the_references_groups_and_residual(name):
    """A KIVI cache holds each sequence's groups as the reference lays them out and its last
    keys in the f16 residual (the rows past them poisoned), and the problem attends over what
    the reference decodes them to."""
    from kvdsl.reference import kivi
    from kvdsl.reference.judge import POISON_BITS

    cfg = catalog.config(name)
    g, d, h = cfg.kivi_group, cfg.head_dim, cfg.kv_heads
    lefts: set[int] = set()
    for case in cases_for(cfg, 3, 5):
        lengths = case.problem.lengths
        if cfg.cache.value == "paged":
            size, table = cfg.page_size, case.buffers["page_table"].reshape(len(lengths), -1)
            pool = case.buffers["kivi_pages"].reshape(-1, h, kivi.page_words(d, 2, g, size))
        else:
            size, table = case.params["seq"], np.arange(len(lengths)).reshape(-1, 1)
            pool = case.buffers["kivi_cache"].reshape(-1, h, kivi.page_words(d, 2, g, size))
        res = [
            case.buffers[n].view(np.float16).reshape(-1, g, d) for n in ("residual_k", "residual_v")
        ]
        for b, n in enumerate(int(n) for n in lengths):
            q = n - n % g
            for x in range(h):
                rk, rv = (r[b * h + x, : n - q] for r in res)
                back = kivi.read_pages(pool, table[b], x, q, 2, g, size, rk, rv)
                dk, dv = kivi.dequantize(back)
                np.testing.assert_array_equal(dk, case.problem.k[b, x, :n])
                np.testing.assert_array_equal(dv, case.problem.v[b, x, :n])
                unwritten = case.buffers["residual_k"].reshape(-1, g, d // 2)[b * h + x, n - q :]
                assert np.all(unwritten == POISON_BITS[4])
        lefts |= {int(n) % g for n in lengths}
    assert len(lefts) > 2  # residuals of several lengths


PLANTED = {
    # variant: (text in its WGSL, the bug)
    "attend_llama31_8b": ("j <= pos0", "j < pos0"),  # the causal mask off by one
    # K's scale read from V's word
    "attend_int8_side_llama31_8b": ("scales[kSide + 0u]", "scales[kSide + 1u]"),
    # K scaled by V's scale
    "attend_template_int4_llama31_8b": ("kv_scale[kScaleAt].x", "kv_scale[kScaleAt].y"),
    # q4_0's codes off by one
    "attend_paged_q4_0_p16_hnd_llama31_8b": (
        "f32(i32(k0Q & 15u) - 8i)",
        "f32(i32(k0Q & 15u) - 7i)",
    ),
    # KIVI: K's stat of the next channel, V's code of the next key
    "attend_kivi2_g32_llama31_8b": (
        "(kc + 1u) * (params.seq / 32u)",
        "(kc + 2u) * (params.seq / 32u)",
    ),
    "attend_paged_kivi2_g32_p256_llama31_8b": (
        "let v0At = j % PAGE_SIZE;",
        "let v0At = (j + 1u) % PAGE_SIZE;",
    ),
    "attend_merge_llama31_8b": ("exp(m0 - newTop)", "1.0f"),  # no rescale to the maximum
    "attend_merge_sinks_gpt_oss_20b": ("l = l + exp(sink - top);", ""),  # the sink dropped
}


@pytest.mark.parametrize("name", PLANTED)
def test_planted_bugs_fail_the_cases(name):
    text, bug = PLANTED[name]
    kernel = catalog.build(name)
    source = emit(kernel)
    assert text in source
    bad = parse(source.replace(text, bug), name, dispatch=kernel.dispatch)
    bad = replace(bad, extents=kernel.extents, requires=kernel.requires)
    failed = 0
    for case in cases_for(catalog.config(name), 3, 0):
        assert case.against_reference(interp.run(kernel, dict(case.buffers), case.params)) == []
        failed += bool(case.against_reference(interp.run(bad, dict(case.buffers), case.params)))
    assert failed >= 1  # as kvdsl verify runs them: some case of three fails


@pytest.mark.parametrize(
    "name, capacity",
    [("attend_llama31_8b", "seq"), ("attend_paged_f16_p16_nhd_llama31_8b", "maxPages")],
)
def test_a_sequence_past_the_caches_capacity_is_refused(tmp_path, capsys, name, capacity):
    """A sequence longer than the contiguous cache's capacity (its rows would be the next
    head's) or than its page-table row (the next sequence's entries) is refused by kvdsl run
    before any backend, as index.json's requirement states; one row fewer runs."""
    from kvdsl import cli

    shape = {"seq": "batch=2,queries=1,chunk=64,chunks=2,seq=40", "maxPages": ""}[capacity]
    if not shape:
        shape = "batch=2,queries=1,chunk=64,chunks=2,pages=8,maxPages=4"
    assert cli.main(["inputs", name, "--shape", shape, "--param", "scale=0.125", "--out",
                     str(tmp_path)]) == 0  # fmt: skip
    npz, params_path = tmp_path / f"{name}.npz", tmp_path / f"{name}.params.json"
    import json

    params = json.loads(params_path.read_text())
    rows = params["seq"] if capacity == "seq" else params["maxPages"] * 16
    arrays = dict(np.load(npz))
    for last, refused in ((rows - 1, False), (rows, True)):
        arrays["seqlens_k"] = np.array([last, 3], np.int32)
        np.savez(npz, **arrays)
        capsys.readouterr()
        argv = ["run", name, "--inputs", str(npz), "--params", str(params_path)]
        try:
            code = cli.main(argv + ["--backend", "interp"])
        except SystemExit as exit_:
            code = exit_.code
        err = capsys.readouterr().err
        if refused:
            assert code == 2 and f"{capacity}" in err and "seqlens_k" in err, err
            assert "fit" in err and err.count("\n") == 1, err
        else:
            assert code == 0, err
