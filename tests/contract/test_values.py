"""The contract's params values and requirements against the kernels: every params field's
``value`` formula, evaluated for a verification case's random shape, gives the case's params and
makes each of the kernel's extents (the least elements a binding must hold for the params) the
element count the contract sizes that binding with; every requirement in ``index.json`` is the
kernel's own condition, refusing exactly the params the runtime refuses; the schema holds both."""

from __future__ import annotations

import copy
import dataclasses
import random

import numpy as np
import pytest

from kvdsl import catalog
from kvdsl.contract import ContractError, check_requirements, entry, evaluate
from kvdsl.contract.modes import formulas
from kvdsl.contract.schema import errors
from kvdsl.harness.cases import cases_for
from kvdsl.ir import tree as ir
from kvdsl.runtime.contract import evaluate as runtime_evaluate
from tests.helpers.contract import seed

import kvdsl.harness.modes  # noqa: F401  (registers the cases of the cache modes)

MODES = sorted({cfg.mode for cfg in catalog.VARIANTS.values()})


def _reads_largest(e: ir.Expr) -> bool:
    return any(isinstance(n, ir.Member) and n.name == "max" for n in ir.walk(e))


def value_problems(name: str, e: dict, kernel: ir.Kernel, shape: dict, case_params: dict):
    """How ``e``'s params values for ``shape`` differ from ``case_params`` and from what the
    kernel's extents need (each binding whose extent reads no input's values)."""
    problems = []
    params = {p["name"]: evaluate(p["value"], shape) for p in e["params"] if "value" in p}
    # Fields with no value (attend's f32 scale and softcap) are the host's: the case's own.
    chosen = {p["name"] for p in e["params"] if "value" not in p}
    if params != {k: int(v) for k, v in case_params.items() if k not in chosen}:
        problems.append(f"{name} {shape}: values give {params}, the case {case_params}")
    elements = {b["name"]: b["elements"] for b in e["bindings"]}
    for binding, extent in kernel.extents:
        if binding not in elements or _reads_largest(extent):
            continue
        need = runtime_evaluate(extent, kernel, params | {k: case_params[k] for k in chosen}, {})
        have = evaluate(elements[binding], shape)
        if need != have:
            problems.append(f"{name} {shape}: '{binding}' extent {need} for the values, {have}")
    return problems


@pytest.mark.parametrize("mode", MODES)
def test_param_values_are_the_kernels(mode):
    """Each variant's values, on random shapes (the verification cases'), give the params the
    harness verifies and exactly the elements the contract sizes each binding with, and meet
    the variant's requirements with the case's own inputs."""
    problems, checked = [], 0
    for name, cfg in catalog.VARIANTS.items():
        if cfg.mode != mode:
            continue
        kernel = catalog.build(name)
        e = entry(kernel, cfg)
        # Every field has a value but the f32 ones a host chooses (attend's scale, softcap).
        assert all("value" in p or p["type"] == "f32" for p in e["params"]), name
        for case in cases_for(cfg, 3, seed(name) + 1):
            shape = {k: int(v) for k, v in case.shape.items()}
            problems += value_problems(name, e, kernel, shape, case.params)
            check_requirements(e, case.params, case.buffers, name)
            checked += 1
    assert not problems, f"{len(problems)} problems, e.g. " + "; ".join(problems[:3])
    assert checked >= 9


def test_unsplit_dense_qkv_values_are_the_kernels():
    """The catalog's dense qkv variants all split K and V; each as ``split=False`` (a K head
    and its V head one row, ``count`` one row fewer per KV head) has values that are its
    kernel's too."""
    checked = 0
    for name, cfg in catalog.VARIANTS.items():
        if cfg.mode not in ("qkv", "paged_qkv") or cfg.format is None:
            continue
        cfg = dataclasses.replace(cfg, split=False)
        kernel = catalog.build_config(cfg, f"{name}_unsplit")
        e = entry(kernel, cfg)
        assert "(q_heads + kv_heads)" in e["params"][0]["meaning"], name
        for case in cases_for(cfg, 2, seed(name)):
            shape = {k: int(v) for k, v in case.shape.items()}
            assert value_problems(name, e, kernel, shape, case.params) == []
            checked += 1
    assert checked >= 8


def test_a_wrong_value_is_caught(monkeypatch):
    """A split dense-format qkv variant's count read as one row per K and V pair of heads (what
    holds for a variant that is not split) is not the verified params, and from 7 batches on
    it leaves the last batch's rows unwritten: the kernel's extents fall short of the
    bindings."""
    name = "qkv_int8_llama31_8b"
    cfg, kernel = catalog.config(name), catalog.build(name)
    assert cfg.format is not None and cfg.split
    e = entry(kernel, cfg)
    shape = {k: int(v) for k, v in cases_for(cfg, 1, 5)[0].shape.items()} | {"batch": 7}
    verified = {p["name"]: evaluate(p["value"], shape) for p in e["params"]}
    assert value_problems(name, e, kernel, shape, verified) == []
    wrong = formulas(cfg) | {"count": "batch * keySeq * (q_heads + kv_heads)"}
    monkeypatch.setattr("kvdsl.contract.modes.formulas", lambda c: wrong)
    problems = value_problems(name, entry(kernel, cfg), kernel, shape, verified)
    assert any("values give" in p for p in problems), problems
    for binding in ("qkv", "q_out", "present_key", "present_value", "present_scales"):
        if kernel.binding(binding) is not None:
            assert any(f"'{binding}' extent" in p for p in problems), (binding, problems)


def test_each_value_formula_shows_in_its_meaning():
    """A meaning states its field's formula (kv_heads, q_heads by name) where it is more than a
    shape variable: the text a reader sees is the value a host evaluates."""
    for name, cfg in catalog.VARIANTS.items():
        e = entry(catalog.build(name), cfg)
        for p in e["params"]:
            formula = formulas(cfg)[p["name"]]
            if formula is not None and " " in formula:
                assert p["meaning"].endswith(": " + formula.replace(" * ", " × ")), (name, p)


def _random_params(e: dict, rng: random.Random) -> dict[str, int]:
    return {p["name"]: rng.choice([0, 1, 2, rng.randint(0, 300)]) for p in e["params"]}


def test_requirements_are_the_kernels():
    """Every variant's requirements are its kernel's (:attr:`Kernel.requires`): on random
    params and ``seqlens_k`` values, :func:`check_requirements` refuses exactly where a
    condition of the kernel is false, naming it, the values and its sentence."""
    rng = random.Random(42)
    refused = held = 0
    for name, cfg in catalog.VARIANTS.items():
        kernel = catalog.build(name)
        e = entry(kernel, cfg)
        assert [r["rule"] for r in e["requires"]] == [t for t, _ in kernel.requires], name
        if not kernel.requires:
            continue
        for _ in range(6):
            params = _random_params(e, rng)
            seqlens = np.array([rng.randint(-3, 400) for _ in range(rng.randint(0, 3))], np.int32)
            inputs = {"seqlens_k": seqlens}
            broken = [
                t for t, c in kernel.requires if not runtime_evaluate(c, kernel, params, inputs)
            ]
            if not broken:
                check_requirements(e, params, inputs, name)
                held += 1
                continue
            with pytest.raises(ContractError) as err:
                check_requirements(e, params, inputs, name)
            r = next(r for r in e["requires"] if r["rule"] == broken[0])
            assert str(err.value).startswith(f"kernel {name} requires {r['rule']}; got "), err
            assert str(err.value).endswith(": " + r["says"]), err
            for k, v in params.items():
                assert f"{k}={v}" in str(err.value)
            refused += 1
    assert refused > 100 and held > 100, (refused, held)


def test_requirement_refusals_name_the_values():
    name = "paged_append_int8_side_page_table_p16_nhd_llama31_8b"
    e = entry(catalog.build(name), catalog.config(name))
    params = {"count": 8, "keySeq": 2, "maxPages": 3}
    check_requirements(e, params, {"seqlens_k": [3, 47]}, name)  # 48 tokens: 3 pages of 16
    with pytest.raises(ContractError) as err:
        check_requirements(e, params, {"seqlens_k": np.array([3, 48], np.int32)}, name)
    assert str(err.value) == (
        f"kernel {name} requires seqlens_k.max + 1 <= maxPages * page_size; got count=8, "
        "keySeq=2, maxPages=3, largest seqlens_k=48: every sequence's tokens up to its last "
        "(seqlens_k + 1) fit its row of page_table: maxPages pages of page_size tokens"
    )
    check_requirements(e, params, {"seqlens_k": 47}, name)  # the largest value alone
    for inputs, words in [
        ({}, "give the values of input 'seqlens_k'"),
        ({"seqlens_k": [1.5]}, r"input 'seqlens_k' is \[1.5\]: expected an array of integers"),
    ]:
        with pytest.raises(ContractError, match=words):
            check_requirements(e, params, inputs, name)
    with pytest.raises(ContractError, match="'keySeq' is u32: got 2.5"):
        check_requirements(e, params | {"keySeq": 2.5}, {"seqlens_k": 0}, name)
    # A kernel is a source too: its requirements rendered as the entry gives them.
    dense = "dense_append_int4_asym_llama31_8b"
    with pytest.raises(ContractError, match=r"requires keySeq <= seq; got count=1, keySeq=9"):
        check_requirements(catalog.build(dense), {"count": 1, "keySeq": 9, "seq": 6})


def test_the_schema_holds_values_and_requirements():
    """index.json's schema takes the values and requirements and refuses them damaged."""
    name = "paged_append_int8_side_page_table_p16_nhd_llama31_8b"
    good = entry(catalog.build(name), catalog.config(name))
    assert errors({name: good}) == []
    breaks = [
        (lambda e: e["params"][0].update(value="batch / 2"), "does not match"),
        (lambda e: e["requires"][1].update(op="=="), "is not one of"),
        (lambda e: e["requires"][1].pop("says"), "'says' is a required property"),
        (lambda e: e["requires"][1].update(largest=[]), "should be non-empty"),
        (lambda e: e["requires"][0].update(colour="red"), "'colour' was unexpected"),
    ]
    for damage, message in breaks:
        e = copy.deepcopy(good)
        damage(e)
        assert any(message in f for f in errors({name: e})), message
