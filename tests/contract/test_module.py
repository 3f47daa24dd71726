"""The npm package kvdsl (emitted/, packed and installed from its tarball: the session's
``kvdsl_package``) under Node.js (no WebGPU there): one node process, importing "kvdsl" as a
runtime does, answers for every catalog variant random cases of it; each answer equals Python's
(the contract's rules, which tests/contract/test_contract.py holds to the runtime), the package's
index.json and WGSL exports are emitted/'s, and the example page's params from a shape
(examples/run.js) equal the case's. Node.js is required, never skipped: scripts/setup.sh
installs it."""

from __future__ import annotations

import json
import random
import shutil
import subprocess

import pytest

from kvdsl import catalog
from kvdsl.contract import ContractError, buffer_sizes, check_requirements, entry
from kvdsl.contract import params_bytes, workgroups
from kvdsl.harness.cases import cases_for
from tests.helpers.contract import dispatch_cases, seed
from tests.helpers.paths import ROOT

import kvdsl.harness.modes  # noqa: F401  (registers the cases of the cache modes)

EMITTED = ROOT / "emitted"
EXAMPLE = ROOT / "examples" / "run.js"
BUFFER_TYPES = {"read": "read-only-storage", "read_write": "storage", "uniform": "uniform"}

PAGED = "paged_append_int8_side_page_table_p16_nhd_llama31_8b"

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
    (
        {"call": "paramsFor", "name": "merge_llama31_8b", "arg": {"batch": 1, "keySeq": 2}},
        "shape variable 'pastSeq' is missing",
    ),
    (
        {
            "call": "checkRequirements",
            "name": PAGED,
            "arg": {"count": 8, "keySeq": 2, "maxPages": 3},
        },
        f"kernel {PAGED} requires seqlens_k.max + 1 <= maxPages * page_size: give the values of "
        "input 'seqlens_k'",
    ),
    (
        {
            "call": "checkRequirements",
            "name": PAGED,
            "arg": {"count": 8, "keySeq": 2, "maxPages": 3},
            "inputs": {"seqlens_k": [1, 2.5]},
        },
        "input 'seqlens_k' is 1,2.5: expected an array of integers or its largest value",
    ),
    (
        {
            "call": "paramsFor",
            "name": "attend_llama31_8b",
            "arg": {"batch": 1, "queries": 1, "chunk": 8, "chunks": 1, "seq": 8},
        },
        "params field 'scale' has no value formula: the host chooses it",
    ),
    (
        {"call": "checkRequirements", "name": "qkv_bsh_llama31_8b", "arg": {"count": 1}},
        "params field 'keySeq' is missing",
    ),
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
        # The fields without a value formula (attend's f32 scale and softcap) are the host's.
        chosen = [p["name"] for p in index[name]["params"] if "value" not in p]
        for c in cases_for(cfg, 3, seed(name)):
            params = {k: float(v) if k in chosen else int(v) for k, v in c.params.items()}
            cases[name].append(
                {
                    "shape": {k: int(v) for k, v in c.shape.items()},
                    "params": params,
                    "chosen": {k: params[k] for k in chosen},
                    "dispatch": dispatch_cases(index[name], params),
                }
            )
    given = {
        "cases": cases,
        "requirements": requirement_calls(),
        "refusals": [r for r, _ in REFUSALS],
    }
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


def requirement_calls() -> list[dict]:
    """Per variant with requirements, random params and ``seqlens_k`` values (an array, or its
    largest value) that meet them or break one."""
    rng = random.Random(7)
    calls = []
    for name, cfg in catalog.VARIANTS.items():
        e = entry(catalog.build(name), cfg)
        if not e["requires"]:
            continue
        for i in range(4):
            params = {p["name"]: rng.choice([0, 1, 2, rng.randint(0, 300)]) for p in e["params"]}
            seqlens = [rng.randint(-3, 400) for _ in range(rng.randint(0, 3))]
            inputs = {"seqlens_k": seqlens if i % 2 else max(seqlens, default=-1)}
            calls.append({"name": name, "params": params, "inputs": inputs})
    return calls


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
                "use": b["use"],
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
            # The params from the shape (the module's, the example page's) are the
            # verification case's.
            assert answer["paramsFor"] == {"value": case["params"]}, name
            assert answer["exampleParams"] == {"value": case["params"]}, name
            for params, wg in zip(case["dispatch"], answer["workgroups"], strict=True):
                want = python_answer(workgroups, e, params)
                if want == "error":
                    assert "per dimension" in wg["error"], (name, params, wg)
                else:
                    assert wg == {"value": list(want["value"])}, (name, params)


def test_the_module_checks_requirements_as_python_does(answered):
    """checkRequirements refuses exactly what :func:`kvdsl.contract.check_requirements` does,
    in the same words; a variant's requirements are index.json's."""
    given, got = answered
    index = json.loads((EMITTED / "index.json").read_text())
    for name, e in index.items():
        assert got["variants"][name]["requires"] == [
            {"largest": []} | r for r in e["requires"]
        ], name
    refused = 0
    for call, answer in zip(given["requirements"], got["requirements"], strict=True):
        name = call["name"]
        try:
            check_requirements(index[name], call["params"], call["inputs"], name)
            want = None
        except ContractError as err:
            want = f"Error: {err}"
            refused += 1
        assert answer == want, call
    assert 100 < refused < len(given["requirements"]) - 100


def test_the_module_refuses_bad_calls_in_words(answered):
    given, got = answered
    for (call, words), answer in zip(REFUSALS, got["refusals"], strict=True):
        assert "error" in answer, call
        assert answer["error"].startswith("Error: ") and words in answer["error"], answer
