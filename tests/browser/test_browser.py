"""Every catalog variant in headless Chromium's WebGPU (SwiftShader) through ``emitted/kvdsl.js``,
judged against the interpreter as the GPU check judges wgpu's outputs (kvdsl.harness.runner:
bit for bit, approximate builtins within the case's tolerance, quantised codes by one step).

The page's runner (runner.js) is a host that knows only the ES module: Python sends a case's
shape, params and input bytes; the runner sizes each buffer with ``bufferSizes(shape)`` (and
checks the bytes fit exactly), writes ``paramsBytes(params)``, builds the pipeline from ``code``
and ``layoutEntries()``, dispatches ``workgroups(params)`` and sends the read_write bindings
back. The foreign-host tests go further: the runner chooses the shape, derives the params from
the contract's meanings and fills the inputs itself.
"""

from __future__ import annotations

import dataclasses
import json
import re
import zlib
from pathlib import Path

import numpy as np
import pytest

from kvdsl import interp
from kvdsl.catalog import VARIANTS, build
from kvdsl.contract import ContractError, check_requirements, entry
from kvdsl.harness.cases import cases_for
from kvdsl.harness.dense import DenseCase
from kvdsl.ir.dispatch import workgroups as dispatch_workgroups
from kvdsl.ir.features import features as kernel_features
from kvdsl.ir.features import limits as kernel_limits
from kvdsl.reference.judge import compare, compare_quantized
from kvdsl.runtime.layout import from_storage, to_storage
from tests.helpers import browser
from tests.helpers.paths import ROOT

pytestmark = pytest.mark.browser

HERE = Path(__file__).parent


def _entry(name: str) -> dict:
    """Variant ``name``'s contract entry (index.json's)."""
    return entry(build(name), VARIANTS[name])


def _seed(name: str) -> int:
    return zlib.crc32(name.encode())


def _json(values: dict) -> dict:
    """Shape or params as JSON numbers (integers stay integers)."""
    return {k: int(v) if isinstance(v, (int, np.integer)) else float(v) for k, v in values.items()}


def _subgroup_size(chromium) -> int:
    """The subgroup size the interpreter runs at: the adapter's where it has one size (4 on
    SwiftShader), else the interpreter's default."""
    lo, hi = chromium.adapter["subgroupMinSize"], chromium.adapter["subgroupMaxSize"]
    return lo if lo is not None and lo == hi and lo in interp.SUBGROUP_SIZES else 32


def _outputs(kernel, result: dict, like: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The page's read_write bindings as arrays like the case's, each exactly its bytes."""
    got = {}
    for b in kernel.bindings:
        if b.access != "read_write":
            continue
        data = browser.unb64(result["outputs"][b.name])
        sent = to_storage(b.elem, like[b.name])
        assert len(data) == len(sent), f"{b.name}: {len(data)} bytes back, {len(sent)} sent"
        got[b.name] = from_storage(b.elem, data, like[b.name])
    assert sorted(got) == sorted(result["outputs"]), "the page read back other bindings"
    return got


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(f"u{a.dtype.itemsize}")


def _lacking(chromium, name: str, kernel, lacking: list[str]) -> None:
    """The page found the adapter without features the variant needs: true of the adapter and
    of the kernel, and its code really is refused without them. Counted, then skipped by name."""
    have = set(chromium.adapter["features"])
    assert lacking and not set(lacking) & have, f"{name}: the adapter has {lacking}"
    assert set(lacking) <= kernel_features(kernel), f"{name}: the kernel needs none of {lacking}"
    refused = chromium.call("refusedWithout", name)
    assert refused, f"{name}: Chromium compiles its code without {lacking}"
    for feature in lacking:
        browser.TALLY.lacking.setdefault(feature, set()).add(name)
    pytest.skip(
        f"{name} needs {', '.join(lacking)}, which the adapter ({chromium.describe()}) lacks"
    )


def _short(chromium, name: str, kernel, short: dict[str, dict[str, int]]) -> None:
    """The page found the adapter offering less of a limit than the variant states: true of the
    kernel (:func:`kvdsl.ir.features.limits`), and its bindings really are refused at WebGPU's
    defaults. Counted, then skipped by name."""
    need = kernel_limits(kernel)
    for limit, got in short.items():
        assert need.get(limit) == got["need"], f"{name}: the kernel needs {need}, not {limit}"
        assert got["offers"] < got["need"], f"{name}: the adapter offers {limit} = {got}"
        browser.TALLY.short.setdefault((limit, got["offers"]), set()).add(name)
    assert chromium.call("refusedAtDefaults", name), f"{name}: its layout fits the defaults"
    pytest.skip(
        f"{name} needs "
        + ", ".join(
            f"{k} = {v['need']} (the adapter offers {v['offers']})" for k, v in short.items()
        )
        + f" on {chromium.describe()}"
    )


def test_runner_imports_only_the_module():
    """The runner is a foreign host: its one import is the npm package kvdsl (no kvdsl Python, no
    other script), which the page's import map finds where the package's exports put its module;
    the page imports only the runner."""
    js = (HERE / "runner.js").read_text()
    imports = re.findall(r"""\bimport\b\s*(?:[\w*{}\s,]+\bfrom\b\s*)?\(?\s*["']([^"']+)["']""", js)
    assert imports == ["kvdsl"], imports
    html = (HERE / "runner.html").read_text()
    assert re.findall(r"""import\(\s*["']([^"']+)["']""", html) == ["./runner.js"]
    assert "<script src" not in html
    mapped = re.findall(r'<script type="importmap">(.*?)</script>', html, re.S)
    assert len(mapped) == 1 and list(json.loads(mapped[0])) == ["imports"], mapped
    exports = json.loads((ROOT / "emitted" / "package.json").read_text())["exports"]
    module = exports["."]["default"].removeprefix("./")
    assert json.loads(mapped[0])["imports"] == {"kvdsl": f"{browser.MODULES}kvdsl/{module}"}


def test_module_lists_the_catalog(chromium):
    """kvdsl.js, as the browser loads it, has every catalog variant with its mode and features."""
    listed = {v["name"]: v for v in chromium.call("listVariants")}
    assert sorted(listed) == sorted(VARIANTS)
    for name, cfg in VARIANTS.items():
        assert listed[name]["mode"] == cfg.mode, name
        assert set(listed[name]["features"]) == kernel_features(build(name)), name


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_variant_matches_interpreter(chromium, name):
    """One random case of ``name`` in Chromium through kvdsl.js, judged against the interpreter
    as the wgpu check judges the GPU; the dispatch is the runtime's."""
    browser.TALLY.tried.add(name)
    cfg, kernel = VARIANTS[name], build(name)
    case = cases_for(cfg, 1, _seed(name))[0]
    inputs = {
        b.name: browser.b64(to_storage(b.elem, case.buffers[b.name])) for b in kernel.bindings
    }
    request = {
        "name": name,
        "shape": _json(case.shape),
        "params": _json(case.params),
        "inputs": inputs,
    }
    result = chromium.call("runCase", request)
    if "lacking" in result:
        _lacking(chromium, name, kernel, result["lacking"])
    if "short" in result:
        _short(chromium, name, kernel, result["short"])
    if "error" in result:
        pytest.fail(f"{name} in Chromium: {result['error']}", pytrace=False)
    assert tuple(result["workgroups"]) == dispatch_workgroups(kernel, case.params)
    got = _outputs(kernel, result, case.buffers)
    want = interp.run(
        kernel, dict(case.buffers), case.params, subgroup_size=_subgroup_size(chromium)
    )
    problems = [
        f"{out}: {problem}"
        for out, _, problem in case.judge(
            got, {k: want[k] for k in case.expected}, case.tolerance, case.codes
        )
        if problem
    ]
    assert not problems, f"{name} [{case.label()}] Chromium vs interp: " + "; ".join(problems)
    browser.TALLY.matched.add(name)


def test_host_derives_the_cases_params(chromium):
    """The runner's own host derives, from each case's shape, the params the harness gives that
    case: for every variant, three cases each (its reading of the contract's meanings)."""
    wrong = []
    for name, cfg in VARIANTS.items():
        # The fields without a value formula (attend's f32 scale, softcap) are the model's.
        chosen = {p["name"] for p in _entry(name)["params"] if "value" not in p}
        for case in cases_for(cfg, 3, _seed(name)):
            got = chromium.call("paramsFor", name, _json(case.shape))
            want = {k: v for k, v in _json(case.params).items() if k not in chosen}
            if {k: v for k, v in got.items() if k not in chosen} != want:
                wrong.append(f"{name} {case.label()}: {got} != {case.params}")
    assert not wrong, f"{len(wrong)} cases, e.g. " + "; ".join(wrong[:3])


def test_requirements_refused_in_the_browser(chromium):
    """kvdsl.js in the page refuses each requirement kvdsl's host refuses, in the same words:
    one variant per requirement, its params just inside and just past it."""
    calls = [
        ("dense_append_int4_asym_llama31_8b", {"count": 16, "keySeq": 2, "seq": 2}, {}),
        ("dense_append_int4_asym_llama31_8b", {"count": 24, "keySeq": 3, "seq": 2}, {}),
        ("qkv_bsh_llama31_8b", {"count": 0, "keySeq": 0, "seq": 4}, {}),
        ("merge_f16_llama31_8b", {"count": 8, "seq": 7, "pastSeq": 4, "keySeq": 2}, {}),
        (
            "paged_read_int4_asym_side_p64_hnd_f16_llama31_8b",
            {"count": 8, "seq": 129, "maxPages": 2},
            {},
        ),
        ("paged_window_p16", {"count": 0, "maxPages": 0, "window": 16}, {}),
    ]
    paged = "paged_append_int8_side_page_table_p16_nhd_llama31_8b"
    for top in (47, 48):
        calls.append((paged, {"count": 8, "keySeq": 2, "maxPages": 3}, {"seqlens_k": [3, top]}))
    refused = 0
    for name, params, inputs in calls:
        try:
            check_requirements(_entry(name), params, inputs, name)
            want = None
        except ContractError as err:
            want, refused = f"Error: {err}", refused + 1
        assert chromium.call("requirementRefusal", name, params, inputs) == want, name
    assert refused == 6


@pytest.mark.parametrize(
    "name", sorted(n for n in VARIANTS if kernel_limits(build(n))) or ["(none states limits)"]
)
def test_stated_limits_are_needed(chromium, name):
    """A variant that states limits past WebGPU's defaults needs them: Chromium refuses its
    bind group layout on a device at the defaults (the 9-10-binding drop-ins)."""
    assert name in VARIANTS, "no catalog variant states limits past the defaults"
    refused = chromium.call("refusedAtDefaults", name)
    assert refused, f"{name}: Chromium takes its bindings at WebGPU's default limits"


def _foreign_variants() -> list[str]:
    """For the foreign host, per mode: the first variant in catalog order that needs no feature,
    and the first with rotary tables (whose rows the host must size) and the first with partial
    rotary (tables of rotary_half entries a position), where the mode has them."""
    chosen = {}
    for name, cfg in VARIANTS.items():
        key = (
            cfg.mode,
            getattr(cfg, "rotary", False),
            getattr(cfg, "rotary_half", None) is not None,
        )
        if key not in chosen and not kernel_features(build(name)):
            chosen[key] = name
    return sorted(chosen.values())


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("name", _foreign_variants())
def test_foreign_host(chromium, name, seed):
    """JavaScript alone chooses the shape (rotary tables' rows included), derives the params,
    fills random inputs (outputs poisoned) and dispatches; its inputs through the interpreter
    give its outputs as the harness judges them (bit for bit; rotary within its tolerance;
    quantised codes by one step; dense rows as :class:`kvdsl.harness.dense.DenseCase` takes them
    apart), elements the interpreter leaves alone keep the poison, and
    every output is written somewhere."""
    cfg, kernel = VARIANTS[name], build(name)
    result = chromium.call("hostRun", name, seed)
    params = result["params"]
    assert tuple(result["workgroups"]) == dispatch_workgroups(kernel, params)
    buffers = {}
    for b in kernel.bindings:
        data = browser.unb64(result["inputs"][b.name])
        buffers[b.name] = np.frombuffer(data, b.host.dtype).copy()
        assert to_storage(b.elem, buffers[b.name]) == data, f"{b.name}: padded bytes"
    want = interp.run(kernel, dict(buffers), params, subgroup_size=_subgroup_size(chromium))
    got = _outputs(kernel, result, buffers)
    assert sorted(got) == sorted(want)
    rules = cases_for(cfg, 1)[0]  # the harness's tolerance and quantised outputs for cfg
    for out in want:
        # What the interpreter wrote is compared; the rest must keep the host's poison.
        written = _bits(want[out]) != _bits(buffers[out])
        # attend writes output with one chunk, else the partials only.
        idle = "partials" if params.get("chunks") == 1 else "output"
        assert written.any() or (cfg.mode == "attend" and out == idle), f"{name} {out}"
        stray = ~written & (_bits(got[out]) != _bits(buffers[out]))
        assert not stray.any(), f"{name} {out}: Chromium wrote {stray.sum()} elements more"
        g, w = got[out][written], want[out][written]
        if isinstance(rules, DenseCase) and out in rules.layout:
            # Packed rows: bit for bit, else taken apart (codes by one step, scales nearly).
            dense = dataclasses.replace(rules, written={out: written})
            ((_, _, problem),) = dense.judge({out: got[out]}, {out: want[out]}, {}, rules.codes)
        elif out in rules.codes:
            _, problem = compare_quantized(g, w, rules.codes[out])
        else:
            _, problem = compare(g, w, rules.tolerance.get(out, 0.0))
        assert not problem, f"{name} {result['shape']} {out}: Chromium vs interp: {problem}"
