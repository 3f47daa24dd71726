"""`kvdsl inputs` writes inputs and params from the contract that `kvdsl run` takes as they are:
random ones for a shape (valid page tables, slots and lengths: the interpreter, which finds
races and out-of-bounds accesses, runs every variant on them), or a verification case; a shape
it cannot serve is one line naming the variable, the value and what is allowed. And `kvdsl
run` names every missing and short binding at once, with the elements each needs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kvdsl import catalog, cli
from kvdsl.cli.make_inputs import from_shape
from kvdsl.contract import entry
from kvdsl.reference.judge import holds_poison
from tests.helpers.contract import SMALL

#: The params fields a host chooses (no formula in index.json), as ``--param`` gives them.
CHOSEN = {"scale": 0.125, "softcap": 30.0}


def small(name: str) -> str:
    """``--shape`` of :data:`SMALL` for variant ``name``."""
    e = entry(catalog.build(name), catalog.config(name))
    return ",".join(f"{v}={SMALL[v]}" for v in e["shape"])


def chosen(name: str) -> dict[str, float]:
    """The values of ``name``'s params fields without a formula (:data:`CHOSEN`)."""
    e = entry(catalog.build(name), catalog.config(name))
    return {p["name"]: CHOSEN[p["name"]] for p in e["params"] if "value" not in p}


def _sample() -> list[str]:
    """A variant of every mode, and one windowed, one rotary paged append, one slot-mapped."""
    seen: dict[str, str] = {}
    for name, cfg in catalog.VARIANTS.items():
        seen.setdefault(cfg.mode, name)
    extra = [
        next(n for n, c in catalog.VARIANTS.items() if c.window),
        "paged_append_knorm_rotary_combined_qwen3_06b",
        "paged_qkv_f16_p16_llama31_8b",
    ]
    return list(seen.values()) + extra


def _main(capsys, argv: list[str]) -> tuple[int, str, str]:
    try:
        code = cli.main(argv)
    except SystemExit as exit_:
        code = exit_.code
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("name", _sample())
def test_inputs_run_on_both_backends(capsys, tmp_path, gpu, name):
    params = [f"--param={k}={v}" for k, v in chosen(name).items()]
    argv = ["inputs", name, "--shape", small(name), *params, "--out", str(tmp_path)]
    code, out, err = _main(capsys, argv)
    assert (code, err) == (0, ""), err
    npz, params = tmp_path / f"{name}.npz", tmp_path / f"{name}.params.json"
    assert f"wrote {npz} " in out and f"--params {params}" in out
    # The outputs as kvdsl verify judges a GPU: on llvmpipe bit for bit but attention's
    # (its exp is approximate: WGSL allows 3 + 2|x| ULP); elsewhere a fused multiply-add or a
    # division an ulp apart moves a float, or a quantised code a step, within verify's allowance.
    argv = ["run", name, "--inputs", str(npz), "--params", str(params), "--backend", "both"]
    code, out, err = _main(capsys, argv)
    assert (code, err) == (0, ""), err
    lines = out.splitlines()
    assert lines and all("GPU == interpreter" in x or "GPU ~ interpreter" in x for x in lines), out


@pytest.mark.parametrize(
    "name",
    ["dense_append_int4_asym_llama31_8b", "kivi_flush_2bit_g128_llama31_8b", "qkv_bsh_llama31_8b"],
)
def test_a_variants_outputs_are_judged_as_verify_judges_a_gpu(name):
    """`kvdsl run --backend both` holds a variant's GPU outputs to the interpreter's as `kvdsl
    verify` does, on inputs of any shape: a quantised code one step off is allowed, two steps
    are not; a stat or scale word is held to the bit (a dense row's scale to a few ulps), and a
    float within the mode's tolerance only."""
    from kvdsl.cli.run import _agreement, verify_allowance
    from kvdsl.interp import run

    cfg = catalog.config(name)
    _, bufs, params = from_shape(name, small(name), 4, chosen(name))
    want = run(catalog.build(name), bufs, params)
    assert set(verify_allowance(cfg, params, want, want)) == set(want)
    out = "present_key" if "present_key" in want else next(iter(want))
    words = want[out]
    codes = _code_word(name, cfg, words, params)

    def judged(changed: np.ndarray) -> tuple[bool, str]:
        got = want | {out: changed}
        return _agreement(
            out, changed, words, 0.0, verify_allowance(cfg, params, got, want).get(out)
        )

    unwritten = holds_poison(words)
    assert unwritten.any(), name  # the shape leaves rows the run does not write
    stray = words.copy()
    stray[np.flatnonzero(unwritten)[0]] = words[np.flatnonzero(~unwritten)[0]]
    assert not judged(stray)[0]  # an element the interpreter left poisoned, written
    if codes is None:  # f32 rows: within the mode's tolerance, not past it
        from kvdsl.harness import run_judge

        tol = run_judge(cfg, params, {}).tolerance[out]
        i = int(np.flatnonzero(np.isfinite(words))[7])  # a written element
        near, far = words.copy(), words.copy()
        near[i] = words[i] * (1 + tol / 4)
        far[i] = words[i] + 4 * tol * (1 + abs(words[i]))
        assert judged(near)[0] and not judged(far)[0], (judged(near), judged(far))
        return
    at, step = codes
    one, two = words.copy(), words.copy()
    one[at] = words[at] ^ step  # one code, one step: its lowest bit flipped
    two[at] = (words[at] & ~np.uint32(3 * step)) | ((((words[at] // step) & 3) ^ 2) * step)
    ok, line = judged(one)
    assert ok and "GPU ~ interpreter: 1 element differs, quantised codes within one step" in line
    assert not judged(two)[0]


def _code_word(name, cfg, words, params):
    """A written code word of the variant's cache and its lowest code's step (None: float
    rows)."""
    if cfg.mode == "qkv":
        return None
    if cfg.mode == "kivi_flush":
        from kvdsl.harness import run_judge

        mask = run_judge(cfg, params, {}).code_mask(words.size)
        at = int(np.flatnonzero(mask & ~holds_poison(words))[0])
        return at, np.uint32(1)
    from kvdsl.reference.formats import row_words

    n = row_words(cfg.fmt, cfg.head_dim, cfg.inline)
    first = int(np.flatnonzero(~holds_poison(words))[0])
    return first - first % n + n - 1, np.uint32(1)  # the row's last word: codes only


def test_every_variant_gets_valid_inputs():
    """Every variant's random inputs pass `kvdsl run`'s checks (from_shape makes them) and the
    interpreter runs them with no race and no access out of bounds; the params are the
    contract's formulas and each array its binding's size for the shape."""
    from kvdsl.contract.expr import evaluate
    from kvdsl.interp import run

    for name, cfg in catalog.VARIANTS.items():
        kernel = catalog.build(name)
        e = entry(kernel, cfg)
        shape, buffers, params = from_shape(name, small(name), 0, chosen(name))
        want = {p["name"]: evaluate(p["value"], shape) for p in e["params"] if "value" in p}
        assert params == want | chosen(name), name
        for b in e["bindings"][:-1] if kernel.params is not None else e["bindings"]:
            n = evaluate(b["elements"], shape) * b["element_bytes"]
            assert buffers[b["name"]].nbytes == n, (name, b["name"])
        run(kernel, buffers, params, None)


def test_a_quantised_attend_cache_holds_encoded_values():
    """A quantised attend cache holds random values as its format's reference encoder stores
    them (finite scales, no random words): every sequence with rows attends to finite partials
    on the interpreter."""
    from kvdsl.interp import run

    # One of each kind of cache (side scales, ggml blocks, the template's, pages): every
    # variant's inputs run on the interpreter in test_every_variant_gets_valid_inputs.
    names = [
        "attend_int4_asym_side_llama31_8b",
        "attend_q4_0_llama31_8b",
        "attend_template_int8_llama31_8b",
        "attend_paged_int8_side_p16_nhd_llama31_8b",
    ]
    for name in names:
        assert catalog.config(name).format is not None
        _, bufs, params = from_shape(name, small(name), 3, chosen(name))
        parts = run(catalog.build(name), bufs, params)["partials"].reshape(2, -1)
        live = bufs["seqlens_k"] >= 0
        assert live.any() and np.isfinite(parts[live]).all(), name


def test_addresses_are_valid_and_random_values_are_not_zero():
    name = "paged_append_page_table_p16_nhd_llama31_8b"
    for seed in range(20):
        shape, bufs, params = from_shape(name, "batch=3,keySeq=5,pages=9,maxPages=4", seed)
        table, seqlens = bufs["page_table"].reshape(3, 4), bufs["seqlens_k"]
        assert (seqlens >= 4).all() and (seqlens + 1 <= 4 * 16).all()
        ids = table[table >= 0]
        assert len(set(ids.tolist())) == ids.size and ids.max() < 9  # no page in two tables
        for b in range(3):  # each sequence's pages hold its tokens
            assert (table[b] >= 0).sum() == -(-(int(seqlens[b]) + 1) // 16)
        assert (bufs["src_k"] != 0).all() and np.isfinite(bufs["src_k"]).all()
    _, bufs, _ = from_shape("paged_append_f16_in_p16_nhd_llama31_8b", "batch=4,keySeq=8,pages=2", 1)
    slots = bufs["slot_mapping"]
    assert len(set(slots.tolist())) == 32 and slots.min() >= 0 and slots.max() < 32
    _, bufs, _ = from_shape("paged_copy_f16_separate_p16_llama31_8b", "pages=6,copies=3", 2)
    assert sorted(bufs["page_pairs"].tolist()) == list(range(6))


def test_case_writes_the_verification_case(capsys, tmp_path, gpu):
    from kvdsl.harness import cases_for

    name = "merge_share_retain_llama31_8b"
    if name not in catalog.VARIANTS:
        name = next(n for n, c in catalog.VARIANTS.items() if c.mode == "merge_share")
    npz, params = tmp_path / "in" / "x.npz", tmp_path / "p.json"
    argv = ["inputs", name, "--case", "2", "--seed", "5"]
    code, out, err = _main(capsys, argv + ["--inputs-out", str(npz), "--params-out", str(params)])
    assert (code, err) == (0, ""), err
    case = cases_for(catalog.config(name), 3, 5)[2]
    assert f"for {case.label()}" in out
    with np.load(npz) as got:
        assert sorted(got.files) == sorted(case.buffers)
        for k, a in case.buffers.items():
            assert np.array_equal(got[k], a, equal_nan=True), k
    assert json.loads(params.read_text()) == case.params
    code, out, err = _main(capsys, ["run", name, "--inputs", str(npz), "--params", str(params),
                                    "--backend", "interp", "--out", str(tmp_path / "o.npz")])  # fmt: skip
    assert (code, err) == (0, ""), err
    with np.load(tmp_path / "o.npz") as got:
        assert not case.against_reference({k: got[k] for k in got.files})


PAGED = "paged_append_page_table_p16_nhd_llama31_8b"

#: (argv after `kvdsl inputs`, the one line of refusal)
REFUSED = [
    ([PAGED], "give --shape NAME=N,... (random inputs) or --case [N] (a verification case), one "
     "of the two"),
    ([PAGED, "--shape", "batch=1", "--case"], "give --shape NAME=N,... (random inputs) or --case "
     "[N] (a verification case), one of the two"),
    (
        ["paged_apend", "--case"],
        "unknown variant 'paged_apend'; did you mean a variant beginning 'paged_append' "
        "(`kvdsl list paged_append`)? (see `kvdsl list`)",
    ),
    ([PAGED, "--shape", "batch=2,keySeq=3,pages=8,maxPages=3,seq=4"], f"--shape: variant {PAGED} "
     "has no shape variable 'seq'; its shape variables are batch, keySeq, pages, maxPages"),
    ([PAGED, "--shape", "batch=2,keySeq=3"], f"--shape: give pages, maxPages too (variant {PAGED}'s "
     "shape variables are batch, keySeq, pages, maxPages)"),
    ([PAGED, "--shape", "batch=2,keySeq=-3,pages=8,maxPages=3"], "--shape: keySeq=-3: expected a "
     "whole number from 0 to 999999999999"),
    ([PAGED, "--shape", "batch=2,batch=3"], "--shape: batch is given twice"),
    ([PAGED, "--shape", "batch"], "--shape: 'batch' is not NAME=VALUE"),
    ([PAGED, "--shape", "batch=2,keySeq=0,pages=8,maxPages=3"], "--shape batch=2,keySeq=0,pages=8,"
     f"maxPages=3: kernel {PAGED} requires keySeq >= 1; got count=0, keySeq=0, maxPages=3: a dispatch brings at least one new token per batch (the "
     "kernel finds a row's batch by dividing by keySeq)"),
    ([PAGED, "--shape", "batch=2,keySeq=20,pages=2,maxPages=3"], "--shape: pages=2: expected at "
     "least 4 (batch=2 sequences' keySeq=20 new tokens, in pages of 16 tokens no two sequences "
     "share)"),
    ([PAGED, "--shape", "batch=2,keySeq=40,pages=9,maxPages=2"], "--shape: maxPages=2: expected at "
     "least 3 (a table row of pages of 16 tokens holds the keySeq=40 new tokens)"),
    (["paged_append_f16_in_p16_nhd_llama31_8b", "--shape", "batch=2,keySeq=9,pages=1"],
     "--shape: pages=1: expected at least 2 (18 new tokens, one slot each, in pages of 16)"),
    (["paged_copy_f16_separate_p16_llama31_8b", "--shape", "pages=5,copies=3"], "--shape: pages=5: "
     "expected at least 6 (copies=3 pairs of distinct pages)"),
    ([PAGED, "--shape", "batch=9999,keySeq=99,pages=8,maxPages=3"], "--shape batch=9999,"
     "keySeq=99,pages=8,maxPages=3: the inputs would take 8,110,477,552 bytes; kvdsl inputs "
     "writes at most 1,073,741,824 (1 GiB): give smaller values"),
    ([PAGED, "--case", "100"], "argument --case: 100 is out of range: give 0 to 99"),
]  # fmt: skip


@pytest.mark.parametrize("argv, message", REFUSED, ids=[r[1][:40] for r in REFUSED])
def test_a_shape_it_cannot_serve_is_one_line(capsys, tmp_path, argv, message):
    code, out, err = _main(capsys, ["inputs", *argv, "--out", str(tmp_path)])
    assert code == 2 and out == "", (code, out)
    assert err.splitlines()[0] == f"kvdsl inputs: {message}" or err.splitlines()[0].endswith(
        f": error: {message}"
    ), err
    assert not list(tmp_path.iterdir())


def test_run_names_every_missing_and_short_binding_at_once(capsys, tmp_path):
    name = "paged_append_page_table_p16_nhd_llama31_8b"
    _, bufs, params = from_shape(name, "batch=2,keySeq=3,pages=8,maxPages=3", 0)
    bufs["src_k"] = bufs["src_k"][:-4]
    del bufs["seqlens_k"], bufs["src_v"]
    np.savez(tmp_path / "in.npz", **bufs)
    argv = ["run", name, "--inputs", str(tmp_path / "in.npz"), "--params", json.dumps(params)]
    code, out, err = _main(capsys, argv + ["--backend", "interp"])
    assert code == 2 and out == ""
    assert err == (
        "kvdsl run: bindings 'src_v' (array<vec4<f32>>, read, 1536 elements), 'seqlens_k' "
        "(array<i32>, read, 2 elements) have no buffer; binding 'src_k' (array<vec4<f32>>) holds "
        f"1535 elements, but kernel {name} touches 1536 for these params ((count + 8u * keySeq - "
        "1u) / (8u * keySeq) * keySeq * 1024u / 4u)\n"
    ), err
