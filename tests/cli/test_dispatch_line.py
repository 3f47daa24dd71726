"""The dispatch rule in kvdsl's WGSL files: every emitted file (and `kvdsl legacy`'s output)
states it in a header line that reads back as index.json's `dispatch`, and `kvdsl run FILE.wgsl`
dispatches by it, so `--workgroups` is needed only for a file from elsewhere."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kvdsl import cli
from kvdsl.catalog_files import DISPATCH_LINE, DispatchLineError, stated_dispatch
from kvdsl.contract import workgroups
from tests.helpers.paths import ROOT
from tests.helpers.wgsl import scale_kernel

EMITTED = ROOT / "emitted"


def _main(capsys, argv: list[str]) -> tuple[int, str, str]:
    code = cli.main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_every_emitted_file_states_index_json_dispatch():
    index = json.loads((EMITTED / "index.json").read_text())
    for name, e in index.items():
        text = (EMITTED / f"{name}.wgsl").read_text()
        assert stated_dispatch(f"{name}.wgsl", text) == e["dispatch"], name
        header = text.split("\n\n", 1)[0]
        assert sum(line.startswith(DISPATCH_LINE) for line in header.splitlines()) == 1, name


def test_legacy_output_states_its_dispatch(capsys):
    from kvdsl import catalog
    from kvdsl.contract.index import dispatch
    from kvdsl.legacy import config_from_vars
    from tests.helpers.legacy import legacy_vars

    for mode in ("copy", "build", "window_shift"):
        vars_ = legacy_vars(mode)
        code, out, err = _main(capsys, ["legacy", "--vars", json.dumps(vars_)])
        assert code == 0, err
        rule = stated_dispatch("legacy.wgsl", out)
        assert rule == dispatch(catalog.build_config(config_from_vars(vars_))), mode
        assert workgroups({"dispatch": rule}, {"count": 130}, 65535)[2] == 1


@pytest.mark.parametrize(
    "name, shape",
    [
        ("paged_read_tvm_f16_llama31_8b", "batch=2,seq=20,pages=6,maxPages=3"),
        ("copy_llama31_8b", "rows=70"),  # two workgroups of 64 rows, the last one partial
    ],
)
def test_run_of_an_emitted_file_needs_no_workgroups(capsys, tmp_path, gpu, name, shape):
    """The file run by its dispatch line gives what the variant run by its dispatch rule gives,
    on both backends."""
    argv = ["inputs", name, "--shape", shape, "--out", str(tmp_path)]
    assert _main(capsys, argv)[0] == 0
    given = ["--inputs", str(tmp_path / f"{name}.npz")]
    given += ["--params", str(tmp_path / f"{name}.params.json"), "--backend", "both"]
    got = {}
    for what in (name, str(EMITTED / f"{name}.wgsl")):
        out = tmp_path / f"out{len(got)}.npz"
        code, stdout, err = _main(capsys, ["run", what, *given, "--out", str(out)])
        assert (code, err) == (0, ""), err
        with np.load(out) as res:
            got[what] = {k: res[k] for k in res.files}
    want, have = got.values()
    assert want.keys() == have.keys()
    for k in want:
        assert np.array_equal(want[k], have[k], equal_nan=True), k
        assert not np.isnan(want[k].astype(np.float32)).all(), k


#: (the line after DISPATCH_LINE, what is wrong with it)
BAD = [
    ('{"items": "count", "per_workgroup": 0, "fold": 65535, "balanced": false}', "per_workgroup 0"),
    ('{"items": "count", "per_workgroup": 64, "fold": 70000, "balanced": false}', "fold past"),
    ('{"items": "count / 2", "per_workgroup": 64, "fold": 65535, "balanced": false}', "division"),
    ('{"items": "count", "per_workgroup": 64, "fold": 65535}', "a field missing"),
    ('{"items": "count", "per_workgroup": 64, "fold": 65535, "balanced": 1}', "balanced 1"),
    ("[1, 2]", "not an object"),
    ("count * 64", "not JSON"),
]


@pytest.mark.parametrize("stated, why", BAD, ids=[b[1] for b in BAD])
def test_a_dispatch_line_that_states_no_rule_is_refused_with_its_line(stated, why):
    text = f"// a kernel\n{DISPATCH_LINE}{stated}\n"
    with pytest.raises(DispatchLineError) as err:
        stated_dispatch("k.wgsl", text)
    assert str(err.value).startswith(f"k.wgsl:2: the dispatch line states {stated!r}: expected a")


SCALE = scale_kernel("n: u32", "src[i] * 2.0")


def test_a_foreign_file_states_its_own_rule_or_gives_workgroups(capsys, tmp_path):
    a = np.arange(1, 201, dtype=np.float32)
    np.savez(tmp_path / "in.npz", src=a, dst=np.full(200, np.nan, np.float32))
    run = ["--inputs", str(tmp_path / "in.npz"), "--params", '{"n": 200}', "--backend", "interp"]
    plain = tmp_path / "plain.wgsl"
    plain.write_text(SCALE)
    code, out, err = _main(capsys, ["run", str(plain), *run])
    assert code == 2 and err == (
        f"kvdsl run: {plain}: the file states no dispatch rule (kvdsl's files do, in a line "
        f"'{DISPATCH_LINE.strip()} {{...}}'): give --workgroups\n"
    )
    stated = tmp_path / "stated.wgsl"
    rule = {"items": "n", "per_workgroup": 64, "fold": 65535, "balanced": False}
    stated.write_text(f"{DISPATCH_LINE}{json.dumps(rule)}\n{SCALE}")
    code, out, err = _main(capsys, ["run", str(stated), *run, "--out", str(tmp_path / "o.npz")])
    assert (code, err) == (0, ""), err
    with np.load(tmp_path / "o.npz") as res:
        assert np.array_equal(res["dst"], a * 2)  # 4 workgroups: every element written
    stated.write_text(f"{DISPATCH_LINE}{json.dumps(rule | {'items': 'm'})}\n{SCALE}")
    code, out, err = _main(capsys, ["run", str(stated), *run])
    assert code == 2 and err.startswith(f"kvdsl run: {stated}: the dispatch line's rule: ")
    assert "'m'" in err and len(err.splitlines()) == 1, err
