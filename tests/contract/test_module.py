"""The npm package kvdsl (emitted/, packed and installed from its tarball: the session's
``kvdsl_package``) under Node.js (no WebGPU there): one node process, importing "kvdsl" as a
runtime does, answers for every catalog variant random cases of it; each answer equals Python's
(the contract's rules, which tests/contract/test_contract.py holds to the runtime), the package's
index.json and WGSL exports are emitted/'s, and the example page's params from a shape
(examples/run.js) equal the case's. Node.js is required, never skipped: scripts/setup.sh
installs it."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from kvdsl import catalog
from kvdsl.contract import ContractError, buffer_sizes, params_bytes, workgroups
from kvdsl.harness.cases import cases_for
from tests.helpers.contract import dispatch_cases, seed
from tests.helpers.paths import ROOT

import kvdsl.harness.modes  # noqa: F401  (registers the cases of the cache modes)

EMITTED = ROOT / "emitted"
EXAMPLE = ROOT / "examples" / "run.js"
BUFFER_TYPES = {"read": "read-only-storage", "read_write": "storage", "uniform": "uniform"}

#: Calls the module must refuse, and words its error must hold.
REFUSALS = [
    ({"call": "variant", "name": "merge_llama99"}, "unknown variant 'merge_llama99'"),
    (
        {"call": "bufferSizes", "name": "merge_llama31_8b", "arg": {"batch": 1, "keySeq": 2}},
        "shape variable 'pastSeq' is missing",
    ),
    (
        {"call": "bufferSizes", "name": "copy_llama31_8b", "arg": {"rows": 2, "batch": 1}},
        "shape has no variable 'batch'",
    ),
    (
        {"call": "bufferSizes", "name": "copy_llama31_8b", "arg": {"rows": -2}},
        "'rows' is -2; expected an integer >= 0",
    ),
    (
        {"call": "paramsBytes", "name": "copy_llama31_8b", "arg": {"count": 2, "seq": 1}},
        "params has no field 'seq'; the fields are count",
    ),
    (
        {"call": "paramsBytes", "name": "merge_llama31_8b", "arg": {"count": 2}},
        "params field 'seq' is missing",
    ),
    (
        {"call": "paramsBytes", "name": "copy_llama31_8b", "arg": {"count": 2.5}},
        "params field 'count' is u32: got 2.5, expected an integer",
    ),
    (
        {"call": "paramsBytes", "name": "copy_llama31_8b", "arg": {"count": 2**32}},
        "params field 'count' is u32: 4294967296 is outside [0, 4294967295]",
    ),
    ({"call": "workgroups", "name": "copy_llama31_8b", "arg": {}}, "params field 'count'"),
]


def node() -> str:
    found = shutil.which("node")
    if found is None:
        pytest.fail("Node.js is needed to test emitted/kvdsl.js: scripts/setup.sh installs it")
    return found


@pytest.fixture(scope="module")
def answered(tmp_path_factory, kvdsl_package) -> tuple[dict, dict]:
    """The cases given to node (every variant's random cases and :data:`REFUSALS`), and node's
    answers, from the installed package's project (module_check.mjs and examples/run.js copied
    there, so both import "kvdsl" from its node_modules)."""
    index = json.loads((EMITTED / "index.json").read_text())
    cases = {}
    for name, cfg in catalog.VARIANTS.items():
        cases[name] = []
        for c in cases_for(cfg, 3, seed(name)):
            params = {k: int(v) for k, v in c.params.items()}
            cases[name].append(
                {
                    "shape": {k: int(v) for k, v in c.shape.items()},
                    "params": params,
                    "dispatch": dispatch_cases(index[name], params),
                }
            )
    given = {"cases": cases, "refusals": [r for r, _ in REFUSALS]}
    path = tmp_path_factory.mktemp("module") / "cases.json"
    path.write_text(json.dumps(given))
    project = kvdsl_package.project
    shutil.copy(ROOT / "tests" / "contract" / "module_check.mjs", project)
    shutil.copy(EXAMPLE, project)
    proc = subprocess.run(
        [node(), "module_check.mjs", str(path)],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return given, json.loads(proc.stdout)


def python_answer(f, *args):
    try:
        return {"value": f(*args)}
    except ContractError:
        return "error"


def test_the_module_answers_as_python_does(answered):
    given, got = answered
    index = json.loads((EMITTED / "index.json").read_text())
    assert got["names"] == list(catalog.VARIANTS)
    assert got["index"] == index
    for name, e in index.items():
        v = got["variants"][name]
        assert v["code"] == (EMITTED / f"{name}.wgsl").read_text()
        assert v["wgslIsCode"], f"the package's {name}.wgsl is not its code"
        assert (v["name"], v["mode"], v["entryPoint"]) == (name, e["mode"], e["entry_point"])
        assert v["workgroupSize"] == e["workgroup_size"] and v["shape"] == e["shape"]
        assert (v["features"], v["limits"]) == (e["features"], e["limits"])
        assert v["config"] == e["config"]
        assert v.get("bytesPerTokenHead") == e.get("bytes_per_token_head"), name
        pages = e.get("pages")
        assert v.get("pages") == (
            None
            if pages is None
            else {
                "pageSize": pages["page_size"],
                "layout": pages["layout"],
                "pool": pages["pool"],
                "pageValues": pages["page_values"],
                "pageBytes": pages["page_bytes"],
                "pageStrideValues": pages["page_stride_values"],
                "scalePageValues": pages["scale_page_values"],
            }
        ), name
        assert v["paramsSize"] == e["params_size"] and v["params"] == e["params"]
        assert v["bindings"] == [
            {
                "binding": b["binding"],
                "name": b["name"],
                "access": b["access"],
                "type": b["type"],
                "elementBytes": b["element_bytes"],
                "elements": b["elements"],
            }
            | ({"data": b["data"]} if "data" in b else {})
            for b in e["bindings"]
        ]
        assert v["layoutEntries"] == [
            {
                "binding": b["binding"],
                "visibility": 4,
                "buffer": {"type": BUFFER_TYPES[b["access"]]},
            }
            for b in e["bindings"]
        ]
        for case, answer in zip(given["cases"][name], v["cases"], strict=True):
            assert answer["sizes"] == {"value": buffer_sizes(e, case["shape"])}, name
            want = params_bytes(e, case["params"]).hex()
            assert answer["paramsBytes"] == {"value": want}, name
            # The example page's params from the shape are the verification case's.
            assert answer["exampleParams"] == {"value": case["params"]}, name
            for params, wg in zip(case["dispatch"], answer["workgroups"], strict=True):
                want = python_answer(workgroups, e, params)
                if want == "error":
                    assert "per dimension" in wg["error"], (name, params, wg)
                else:
                    assert wg == {"value": list(want["value"])}, (name, params)


def test_the_module_refuses_bad_calls_in_words(answered):
    given, got = answered
    for (call, words), answer in zip(REFUSALS, got["refusals"], strict=True):
        assert "error" in answer, call
        assert answer["error"].startswith("Error: ") and words in answer["error"], answer
