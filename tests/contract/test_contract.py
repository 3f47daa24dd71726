"""The host contract (kvdsl.contract) against the runtime: for every catalog variant and random
cases of it, the element-count expressions give the case's buffer sizes (padded as the runtime
pads them), the contract's params layout packs the bytes ``pack_params`` packs, and the dispatch
data gives the workgroups the runtime dispatches; index.json validates against its schema."""

from __future__ import annotations

from dataclasses import replace

import copy
import re
import json

import jsonschema
import numpy as np
import pytest

from kvdsl import catalog
from kvdsl.contract import ContractError, ExprError, buffer_sizes, entry, evaluate
from kvdsl.contract import params_bytes, workgroups
from kvdsl.contract.expr import product
from kvdsl.contract.modes import CONTRACTS, SHAPES, WINDOW_SHAPE
from kvdsl.contract.schema import errors, schema, validator
from kvdsl.harness.cases import cases_for
from kvdsl.kernels.dense import bytes_per_token_head
from kvdsl.ir.dispatch import DispatchError
from kvdsl.ir.dispatch import workgroups as runtime_workgroups
from kvdsl.runtime.layout import pack_params, to_storage
from tests.helpers.contract import dispatch_cases, seed
from tests.helpers.paths import ROOT

import kvdsl.harness.modes  # noqa: F401  (registers the cases of the cache modes)

MODES = sorted({cfg.mode for cfg in catalog.VARIANTS.values()})


@pytest.mark.parametrize("mode", MODES)
def test_sizes_layout_and_dispatch_match_the_runtime(mode):
    checked = 0
    for name, cfg in catalog.VARIANTS.items():
        if cfg.mode != mode:
            continue
        kernel = catalog.build(name)
        e = entry(kernel, cfg)
        for case in cases_for(cfg, 4, seed(name)):
            assert list(case.shape) == e["shape"], name
            sizes = buffer_sizes(e, case.shape)
            for b, spec in zip(kernel.bindings, e["bindings"]):
                data = case.buffers[b.name]
                assert data.size % b.host_values == 0, (name, b.name)
                elements = evaluate(spec["elements"], case.shape)
                assert elements == data.size // b.host_values, (name, b.name, case.shape)
                assert sizes[b.name] == len(to_storage(b.elem, data)), (name, b.name)
            packed = pack_params(kernel.params, case.params)
            assert sizes["params"] == len(packed) == e["params_size"]
            assert params_bytes(e, case.params) == packed, name
            assert workgroups(e, case.params) == runtime_workgroups(kernel, case.params), name
            # Past the fold (x stays within it; y carries the rest), and past what the device
            # allows per dimension: both refuse.
            for params in dispatch_cases(e, case.params):
                try:
                    want = runtime_workgroups(kernel, params)
                except DispatchError:
                    with pytest.raises(ContractError, match="per dimension"):
                        workgroups(e, params)
                else:
                    assert workgroups(e, params) == want, (name, params)
            checked += 1
    assert checked >= 12
    folded = [runtime_workgroups(kernel, p)[1] > 1 for p in dispatch_cases(e, case.params)[1:3]]
    assert folded == [True, True]


def test_the_contract_covers_every_binding_and_field(monkeypatch):
    """Each mode's table sizes every binding its variants have and gives every params field a
    meaning; a binding or field missing from the table is an error naming it."""
    for name, cfg in catalog.VARIANTS.items():
        e = entry(catalog.build(name), cfg)
        assert all(p["meaning"] for p in e["params"])
        window = set(WINDOW_SHAPE) if cfg.window else set()
        # positions: the rotary tables' rows; maxPages: a paged variant's page_table row.
        table = {"maxPages"} if any(b["name"] == "page_table" for b in e["bindings"]) else set()
        # The attend modes add the cache's variable (seq or pages) and their options'; a paged
        # KIVI variant has pages in place of groups.
        own = CONTRACTS[cfg.mode].shape_of(cfg)
        assert set(e["shape"]) - {"positions"} == set(own) | window | table
    cfg, kernel = catalog.config("merge_llama31_8b"), catalog.build("merge_llama31_8b")
    merge = CONTRACTS["merge"]
    meanings = {k: v for k, v in merge.meanings.items() if k != "keySeq"}
    with monkeypatch.context() as m:
        m.setitem(CONTRACTS, "merge", replace(merge, meanings=meanings))
        with pytest.raises(ContractError, match="params field 'keySeq' has no meaning"):
            entry(kernel, cfg)
    fewer = replace(merge, sizes=lambda c: {k: v for k, v in merge.sizes(c).items() if k != "past_v"})  # fmt: skip
    with monkeypatch.context() as m:
        m.setitem(CONTRACTS, "merge", fewer)
        with pytest.raises(ContractError, match="binding 'past_v' has no size"):
            entry(kernel, cfg)


def test_dense_entries_give_bytes_per_token_head():
    """A dense variant's entry gives the bytes of one (token, head) row of K (or V), scales
    included, and its cache bindings' sizes agree: per (batch, token) row, kv_heads such rows
    of words (plus, with side scales, half the scales binding: K's). No other entry has it."""
    dense = 0
    for name, cfg in catalog.VARIANTS.items():
        e = entry(catalog.build(name), cfg)
        if not cfg.mode.startswith("dense_"):
            assert "bytes_per_token_head" not in e, name
            continue
        dense += 1
        per = e["bytes_per_token_head"]
        assert per == bytes_per_token_head(cfg) > 0, name
        one = {k: 1 for k in e["shape"]}
        sizes = buffer_sizes(e, one)
        heads = 1 if cfg.mode in ("dense_read", "dense_convert") else cfg.kv_heads
        cache, side = (
            ("cache_key", "cache_scales")
            if cfg.mode == "dense_read"
            else ("present_key", "present_scales")
        )
        assert sizes[cache] + sizes.get(side, 0) // 2 == heads * per, name
    assert dense == sum(cfg.mode.startswith("dense_") for cfg in catalog.VARIANTS.values()) > 30


def test_index_json_validates_against_its_schema():
    index = json.loads((ROOT / "emitted" / "index.json").read_text())
    assert set(index) == set(catalog.VARIANTS)
    assert errors(index) == []
    on_disk = json.loads((ROOT / "emitted" / "index.schema.json").read_text())
    assert on_disk == schema()


def test_the_schema_is_valid_under_its_metaschema():
    """The schema is of the draft it names (2020-12) and keeps that draft's metaschema; a schema
    breaking it is refused before anything is validated."""
    s = schema()
    assert s["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert isinstance(validator(s), jsonschema.Draft202012Validator)
    jsonschema.Draft202012Validator.check_schema(s)
    broken = copy.deepcopy(s)
    broken["properties"] = {"x": {"type": "float"}} | broken.get("properties", {})
    with pytest.raises(jsonschema.SchemaError, match="'float' is not valid"):
        validator(broken)


def test_the_schema_refuses_broken_entries():
    index = json.loads((ROOT / "emitted" / "index.json").read_text())
    good = index["merge_llama31_8b"]
    where = "index.json.merge_llama31_8b"
    breaks = [
        (lambda e: e.pop("shape"), f"{where}: 'shape' is a required property"),
        (
            lambda e: e["bindings"][0].update(elements="batch / 2"),
            ".elements: 'batch / 2' does not",
        ),
        (lambda e: e["params"][0].update(type="f16"), "params[0].type: 'f16' is not one of"),
        (lambda e: e["params"][1].pop("meaning"), "params[1]: 'meaning' is a required property"),
        (lambda e: e.update(colour="red"), "('colour' was unexpected)"),
        (lambda e: e.update(workgroup_size=[64, 1]), "workgroup_size: [64, 1] is too short"),
        (lambda e: e["bindings"][2].update(access="write"), "'write' is not one of"),
        (lambda e: e["dispatch"].update(per_workgroup=0), "per_workgroup: 0 is less than"),
        (lambda e: e["limits"].update(maxBufferSize="big"), "'big' is not of type 'integer'"),
        (lambda e: e.update(dispatch=[]), "dispatch: [] is not valid under any of the given"),
        (lambda e: e.update(bytes_per_token_head=0), "0 is less than the minimum of 1"),
    ]
    for damage, message in breaks:
        e = copy.deepcopy(good)
        damage(e)
        found = errors({"merge_llama31_8b": e})
        assert len(found) == 1 and message in found[0], (message, found)


def test_expression_language():
    shape = {"batch": 3, "pastSeq": 17, "keySeq": 9}
    assert evaluate("batch * (pastSeq + keySeq) * 256", shape) == 3 * 26 * 256
    assert evaluate(" 2 + 3 * 4 ", {}) == 14
    assert evaluate("10 - 2 - 3", {}) == 5
    assert evaluate("(10 - (2 - 3))", {}) == 11
    assert evaluate("batch*keySeq", shape) == 27
    assert evaluate("4294967295 * 4294967295", {}) == 4294967295**2
    for text, message in [
        ("batch / 2", "'/' at 6 is not an integer"),
        ("rows * 4", "variable 'rows' is missing"),
        ("(1 + 2", "ends early"),
        ("(1 + 2 3", r"expected '\)'"),
        ("1 2", "unexpected '2'"),
        ("1 +", "ends early"),
        ("", "ends early"),
    ]:
        with pytest.raises(ExprError, match=message):
            evaluate(text, shape)
    assert product("batch * seq", 256) == "batch * seq * 256"
    assert product("batch", "pastSeq + keySeq", 1) == "batch * (pastSeq + keySeq)"
    assert product("perChannel * 7 + 1", 1) == "perChannel * 7 + 1"
    assert product("batch * (pastSeq + keySeq)", 8) == "batch * (pastSeq + keySeq) * 8"


def test_host_values_are_checked():
    e = entry(catalog.build("merge_llama31_8b"), catalog.config("merge_llama31_8b"))
    shape = {"batch": 2, "pastSeq": 3, "keySeq": 4}
    for bad, message in [
        ({"batch": 2, "pastSeq": 3}, "shape variable 'keySeq' is missing"),
        (shape | {"rows": 1}, "shape has no variable 'rows'"),
        (shape | {"batch": -1}, "'batch' is -1; expected an integer >= 0"),
        (shape | {"batch": 1.5}, "'batch' is 1.5"),
    ]:
        with pytest.raises(ContractError, match=message):
            buffer_sizes(e, bad)
    params = {"count": 56, "seq": 7, "pastSeq": 3, "keySeq": 4}
    with pytest.raises(ContractError, match="params has no field 'total'"):
        params_bytes(e, params | {"total": 1})
    with pytest.raises(ContractError, match="params field 'seq' is missing"):
        params_bytes(e, {"count": 1, "pastSeq": 3, "keySeq": 4})
    for bad, message in [
        (-1, r"'count' is u32: -1 is outside \[0, 4294967295\]"),
        (2**32, "is outside"),
        (2.5, "'count' is u32: got 2.5, expected an integer"),
        (True, "got True, expected an integer"),
    ]:
        with pytest.raises(ContractError, match=message):
            params_bytes(e, params | {"count": bad})
    assert buffer_sizes(e, {k: np.int64(v) for k, v in shape.items()}) == buffer_sizes(e, shape)


def test_host_doc_names_each_modes_shape_variables():
    """docs/host.md's table of shape variables is the contract's."""
    doc = (ROOT / "docs" / "host.md").read_text()
    for mode, names in SHAPES.items():
        row = re.search(rf"^\| `{mode}` \| (.*?) \|", doc, re.M)
        assert row is not None, mode
        assert re.findall(r"`(\w+)`", row.group(1)) == list(names), mode


def test_each_mode_states_its_contract_once():
    """Every catalog mode has one contract record, in one family module, and verification cases;
    no record is for a mode the catalog lacks. A record's shape is its own shape variables."""
    from kvdsl.contract import modes
    from kvdsl.harness.cases import CASES

    families = [set(f.CONTRACTS) for f in modes.FAMILIES]
    assert sum(map(len, families)) == len(set().union(*families)) == len(modes.CONTRACTS)
    assert set(modes.CONTRACTS) == set(catalog.MODES) == set(CASES)
    for mode, c in modes.CONTRACTS.items():
        assert modes.SHAPES[mode] == c.shape and c.meanings, mode
