"""``emitted/`` as the npm package ``kvdsl`` (tests/helpers/package.py): its ``package.json`` is
generated at kvdsl's version, ``npm pack`` takes exactly what a runtime loads, ``kvdsl.d.ts`` holds
for a TypeScript host under ``tsc --strict`` (and a damaged declaration fails it), the host's plans
for one variant of each mode equal Python's contract, and ajv validates the package's
``index.json`` against its schema as ``jsonschema`` does in Python."""

from __future__ import annotations

import copy
import json
import shutil
import tomllib

import numpy as np
import pytest

from kvdsl import __version__, catalog
from kvdsl.catalog_files import package_json
from kvdsl.contract import buffer_sizes, workgroups
from kvdsl.harness.cases import cases_for
from tests.helpers import package
from tests.helpers.contract import seed
from tests.helpers.paths import ROOT

import kvdsl.harness.modes  # noqa: F401  (registers the cases of the cache modes)

EMITTED = ROOT / "emitted"
#: One variant of each mode: the catalog's first.
BY_MODE = {}
for _name, _cfg in catalog.VARIANTS.items():
    BY_MODE.setdefault(_cfg.mode, _name)


@pytest.fixture(autouse=True)
def _node_tools():
    """tsc and ajv in tests/node (scripts/setup.sh's npm ci): without them each test fails in one
    line naming the fix."""
    missing = None
    try:
        for name in ("typescript", "ajv"):
            package.node_module(name)
        package.tool("node")
    except package.NodeMissing as err:
        missing = str(err)
    if missing is not None:
        pytest.fail(missing, pytrace=False)


def test_package_json_is_generated_at_kvdsls_version():
    meta = json.loads((EMITTED / "package.json").read_text())
    assert (EMITTED / "package.json").read_text() == package_json()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert meta["name"] == "kvdsl" and meta["type"] == "module"
    assert meta["version"] == pyproject["project"]["version"] == __version__
    assert meta["types"] == meta["exports"]["."]["types"] == "./kvdsl.d.ts"
    assert meta["exports"]["."]["default"] == "./kvdsl.js"
    for target in meta["exports"].values():
        for path in target.values() if isinstance(target, dict) else [target]:
            if "*" not in path:
                assert (EMITTED / path).is_file(), path


def test_npm_pack_takes_exactly_what_a_runtime_loads():
    wanted = ["package.json", "kvdsl.js", "kvdsl.d.ts", "index.json", "index.schema.json"]
    wanted += [f"{name}.wgsl" for name in catalog.VARIANTS]
    assert package.packed_files() == sorted(wanted)


def test_the_installed_package_is_emitted(kvdsl_package):
    installed = kvdsl_package.package
    assert sorted(p.name for p in installed.iterdir()) == sorted(package.packed_files())
    for name in ("package.json", "kvdsl.d.ts", "index.json", "copy_llama31_8b.wgsl"):
        assert (installed / name).read_bytes() == (EMITTED / name).read_bytes(), name


def test_the_typescript_host_checks_under_strict(kvdsl_package):
    proc = package.tsc(kvdsl_package.project, "--noEmit", "--strict")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-1000:]


@pytest.mark.parametrize(
    "old, new, error",
    [
        ("paramsBytes(params", "paramBytes(params", "Property 'paramsBytes' does not exist"),
        ("readonly paramsSize: number", "readonly paramsSize: string", "'number' and 'string'"),
        ("export function variant(", "export function variantNamed(", "variant"),
        ('"read" | "read_write" | "uniform"', '"read" | "write"', "Type '\"write\"' is not"),
        ("readonly offset: number", "readonly offset?: number", "'number | undefined' is not"),
    ],
)
def test_a_wrong_declaration_fails_tsc(kvdsl_package, tmp_path, old, new, error):
    project = tmp_path / "project"
    shutil.copytree(kvdsl_package.project, project, symlinks=True)
    dts = project / "node_modules" / "kvdsl" / "kvdsl.d.ts"
    text = dts.read_text()
    assert old in text
    dts.write_text(text.replace(old, new))
    proc = package.tsc(project, "--noEmit", "--strict")
    assert proc.returncode != 0 and "error TS" in proc.stdout, proc.stdout
    assert error in proc.stdout, proc.stdout


def test_the_typescript_hosts_plans_are_pythons(kvdsl_package, tmp_path):
    """The host compiled by tsc and run under Node.js on one variant of each mode, each plan
    compared with index.json and Python's sizes, params bytes and workgroups."""
    project = kvdsl_package.project
    proc = package.tsc(project, "--strict")
    assert proc.returncode == 0, proc.stdout[-3000:]
    index = json.loads((EMITTED / "index.json").read_text())
    cases = []
    for name in BY_MODE.values():
        c = next(iter(cases_for(catalog.config(name), 1, seed(name))))
        shape = {k: int(v) for k, v in c.shape.items()}
        cases.append({"name": name, "shape": shape, "params": {k: v for k, v in c.params.items()}})
    given = tmp_path / "cases.json"
    given.write_text(json.dumps(cases, default=lambda v: v.item()))
    shutil.copy(package.NODE / "host_check.mjs", project)
    run = package.run(["node", "host_check.mjs", str(given)], cwd=project)
    assert run.returncode == 0, run.stderr[-3000:]
    plans = json.loads(run.stdout)
    assert [p["mode"] for p in plans] == list(BY_MODE)
    for case, p in zip(cases, plans, strict=True):
        name, e = case["name"], index[case["name"]]
        assert (p["name"], p["entryPoint"], p["workgroupSize"]) == (
            name,
            e["entry_point"],
            e["workgroup_size"],
        )
        assert (p["features"], p["limits"], p["config"]) == (
            e["features"],
            e["limits"],
            e["config"],
        )
        assert p["codeLines"] == (EMITTED / f"{name}.wgsl").read_text().count("\n") + 1
        assert p["shape"] == e["shape"] and p["paramsSize"] == e["params_size"]
        sizes = buffer_sizes(e, case["shape"])
        assert [b["bytes"] for b in p["buffers"]] == [sizes[b["name"]] for b in e["bindings"]]
        for got, b in zip(p["buffers"], e["bindings"], strict=True):
            assert got["layout"]["binding"] == b["binding"] and got["data"] == b.get("data"), name
            assert (got["name"], got["access"], got["type"], got["elements"]) == (
                b["name"],
                b["access"],
                b["type"],
                b["elements"],
            )
            assert got["elementBytes"] == b["element_bytes"], name
        for f, param in zip(p["fields"], e["params"], strict=True):
            assert (f["name"], f["type"], f["offset"]) == (
                param["name"],
                param["type"],
                param["offset"],
            )
            assert f["meaning"] == param["meaning"]
            want = case["params"].get(f["name"], 0)
            assert f["value"] == (float(np.float32(want)) if f["type"] == "f32" else want), name
        assert p["workgroups"] == list(workgroups(e, case["params"])), name
        assert p["bytesPerTokenHead"] == e.get("bytes_per_token_head"), name
        assert p["bytesMoved"] == e.get("bytes_moved"), name
        pages = e.get("pages")
        camel = {"page_size": "pageSize", "page_values": "pageValues", "page_bytes": "pageBytes"}
        camel |= {"page_stride_values": "pageStrideValues", "scale_page_values": "scalePageValues"}
        assert p["pages"] == (
            None if pages is None else {camel.get(k, k): v for k, v in pages.items()}
        ), name


#: Damage to merge_llama31_8b's entry and the words of ajv's error for it.
AJV_REFUSES = [
    (lambda e: e.pop("shape"), "/merge_llama31_8b must have required property 'shape'"),
    (lambda e: e["bindings"][0].update(elements="batch / 2"), "/bindings/0/elements must match"),
    (lambda e: e["params"][0].update(type="f16"), "/params/0/type must be equal to one of"),
    (lambda e: e.update(colour="red"), "/merge_llama31_8b must NOT have additional properties"),
    (lambda e: e.update(workgroup_size=[64, 1]), "must NOT have fewer than 3 items"),
    (lambda e: e["dispatch"].update(per_workgroup=0), "/dispatch/per_workgroup must be >= 1"),
    (lambda e: e["limits"].update(maxBufferSize="big"), "/limits/maxBufferSize must be integer"),
    (lambda e: e.update(dispatch=[]), "/dispatch must match exactly one schema in oneOf"),
]


def test_ajv_validates_the_packages_index(kvdsl_package, tmp_path):
    good = json.loads((EMITTED / "index.json").read_text())["merge_llama31_8b"]
    damaged = []
    for damage, _ in AJV_REFUSES:
        e = copy.deepcopy(good)
        damage(e)
        damaged.append({"merge_llama31_8b": e})
    given = tmp_path / "entries.json"
    given.write_text(json.dumps([{"merge_llama31_8b": good}] + damaged))
    script = package.NODE / "validate_index.mjs"
    proc = package.run(["node", str(script), str(kvdsl_package.project), str(given)], cwd=tmp_path)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr[-3000:]
    got = json.loads(proc.stdout)
    assert got["index"] is None, got["index"][:10]
    assert got["entries"][0] is None, got["entries"][0]
    for (_, words), found in zip(AJV_REFUSES, got["entries"][1:], strict=True):
        assert found and any(words in f for f in found), (words, found)
