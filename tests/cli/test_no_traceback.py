"""Every command given bad input of every kind: exit code 2 and one line on stderr (two where
the second is argparse's usage hint), with no traceback and no Python type name; the same with
``--traceback`` shows Python's report. A check that finds problems in what it checks exits 1
and says so on stdout, with the same rules."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from kvdsl import cli

#: Words that give away Python beneath: type and exception names, numpy's names.
PYTHON = re.compile(
    r"Traceback|internal error|\b(int|str|float|bool|NoneType|ndarray|dict|list|tuple|"
    r"KeyError|ValueError|TypeError|IndexError|AttributeError|RuntimeError|OSError|"
    r"RecursionError|OverflowError|MemoryError|Exception|numpy|np|allow_pickle|dtype)\b"
)
HINT = re.compile(r"^kvdsl( \w+)?: see 'kvdsl( \w+)? --help' for the options$")
#: Phrases of kvdsl's own words that hold one of PYTHON's: command names.
OWN_WORDS = ("kvdsl list", "'list'")

ROWS, HEAD_DIM = 4, 64  # copy_qwen25_05b: rows of 64 f32 values, as vec4
RUN = ["run", "copy_qwen25_05b", "--backend", "interp"]
COPY_VARS = {"mode": "copy", "headDim": 64, "copyWorkgroupSize": 64, "DISPATCH_FOLD_WIDTH": 65535}


def _files(d: Path) -> None:
    """The inputs the cases name, under ``d``."""
    n = ROWS * HEAD_DIM
    rng = np.random.default_rng(7)
    good = {k: rng.standard_normal(n).astype(np.float32) for k in ("src_k", "src_v")}
    good |= {k: np.full(n, np.nan, np.float32) for k in ("present_key", "present_value")}
    np.savez(d / "good.npz", **good)
    np.savez(d / "short.npz", **(good | {"src_k": good["src_k"][:-4]}))
    np.savez(d / "f64.npz", **(good | {"src_k": good["src_k"].astype(np.float64)}))
    np.savez(d / "i64.npz", **(good | {"src_k": np.arange(n, dtype=np.int64)}))
    np.savez(d / "strings.npz", **(good | {"src_k": np.array(["a"] * n)}))
    np.savez(d / "bools.npz", **(good | {"src_k": np.ones(n, bool)}))
    np.savez(d / "missing.npz", **{k: v for k, v in good.items() if k != "src_v"})
    np.savez(d / "extra.npz", **(good | {"bogus": good["src_k"]}))
    np.savez(d / "objects.npz", **(good | {"src_k": np.array([{}, 1], dtype=object)}))
    np.savez(d / "empty.npz")
    (d / "text.npz").write_text("hello")
    np.save(d / "array.npy", good["src_k"])
    (d / "cut.npz").write_bytes((d / "good.npz").read_bytes()[:300])
    (d / "binary.wgsl").write_bytes(b"\xff\xfe\x00 not text")
    (d / "syntax.wgsl").write_text("@compute @workgroup_size(1) fn main( {")
    (d / "kernel.wgsl").write_text(
        "@group(0) @binding(0) var<storage, read_write> out: array<f32>;\n\n"
        "@compute @workgroup_size(64)\n"
        "fn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n    out[gid.x] = 1.0f;\n}\n"
    )
    np.savez(d / "out.npz", out=np.full(64, np.nan, np.float32))
    (d / "folder").mkdir()
    (d / "a_file").write_text("x")


def _params(count) -> list[str]:
    return ["--params", json.dumps({"count": count})]


def _inputs(name: str) -> list[str]:
    return ["--inputs", f"{{d}}/{name}"]


GOOD = RUN + _inputs("good.npz") + _params(ROWS)


def case(what: str, argv: list[str], code: int = 2):
    """A row: ``argv`` (``{d}`` the inputs' folder) and its exit code."""
    return pytest.param(argv, code, id=what)


CASES = [
    # ---- kvdsl (no command) ----
    case("no command", []),
    case("unknown command", ["paint"]),
    case("unknown option", ["--bogus", "list"]),
    case("webgpu not a choice", ["--webgpu", "webgl", "list"]),
    # ---- run: the variant or file ----
    case("run unknown variant", ["run", "copy_nope"] + _inputs("good.npz")),
    case("run empty variant name", ["run", ""] + _inputs("good.npz")),
    case("run missing wgsl file", ["run", "{d}/nope.wgsl", "--workgroups", "1,1,1"]
         + _inputs("out.npz")),
    case("run wgsl not text", ["run", "{d}/binary.wgsl", "--workgroups", "1,1,1"]
         + _inputs("out.npz")),
    case("run wgsl folder", ["run", "{d}/folder.wgsl", "--workgroups", "1,1,1"]
         + _inputs("out.npz")),
    case("run wgsl syntax", ["run", "{d}/syntax.wgsl", "--workgroups", "1,1,1"]
         + _inputs("out.npz")),
    case("run wgsl without workgroups", ["run", "{d}/kernel.wgsl"] + _inputs("out.npz")),
    case("run constants on a variant", GOOD + ["--constants", "X=1"]),
    case("run constants not name=value", ["run", "{d}/kernel.wgsl", "--workgroups", "1,1,1",
                                          "--constants", "X"] + _inputs("out.npz")),
    case("run constants naming no override", ["run", "{d}/kernel.wgsl", "--workgroups", "1,1,1",
                                              "--constants", "X=1"] + _inputs("out.npz")),
    # ---- run: the options ----
    case("run without inputs", RUN + _params(ROWS)),
    case("run backend not a choice", GOOD[:2] + _inputs("good.npz") + ["--backend", "cpu"]),
    case("run unknown option", GOOD + ["--fast"]),
    case("run tol negative", ["run", "copy_qwen25_05b", "--backend", "both", "--tol", "-1"]
         + _inputs("good.npz") + _params(ROWS)),
    case("run tol nan", ["run", "copy_qwen25_05b", "--backend", "both", "--tol", "nan"]
         + _inputs("good.npz") + _params(ROWS)),
    case("run tol not a number", GOOD + ["--tol", "tiny"]),
    case("run tol without both", GOOD + ["--tol", "0.1"]),
    case("run subgroup size 3", GOOD + ["--subgroup-size", "3"]),
    case("run subgroup size text", GOOD + ["--subgroup-size", "x"]),
    case("run subgroup size on the gpu", ["run", "copy_qwen25_05b", "--subgroup-size", "8"]
         + _inputs("good.npz") + _params(ROWS)),
    case("run workgroups two", GOOD + ["--workgroups", "1,2"]),
    case("run workgroups four", GOOD + ["--workgroups", "1,1,1,1"]),
    case("run workgroups text", GOOD + ["--workgroups", "a,b,c"]),
    case("run workgroups negative", GOOD + ["--workgroups", "-1,1,1"]),
    case("run workgroups empty", GOOD + ["--workgroups", ""]),
    case("run workgroups past the interpreter", ["run", "{d}/kernel.wgsl", "--backend", "interp",
         "--workgroups", "65535,65535,64"] + _inputs("out.npz")),  # fmt: skip
    case("run out not writable", GOOD + ["--out", "{d}/a_file/x.npz"]),
    # ---- run: the inputs ----
    case("run inputs missing", RUN + _inputs("nope.npz") + _params(ROWS)),
    case("run inputs text", RUN + _inputs("text.npz") + _params(ROWS)),
    case("run inputs npy", RUN + _inputs("array.npy") + _params(ROWS)),
    case("run inputs cut short", RUN + _inputs("cut.npz") + _params(ROWS)),
    case("run inputs folder", RUN + _inputs("folder") + _params(ROWS)),
    case("run inputs empty archive", RUN + _inputs("empty.npz") + _params(ROWS)),
    case("run inputs short", RUN + _inputs("short.npz") + _params(ROWS)),
    case("run inputs float64", RUN + _inputs("f64.npz") + _params(ROWS)),
    case("run inputs int64", RUN + _inputs("i64.npz") + _params(ROWS)),
    # A big-endian array is no bad input: it runs as its values say (test_inputs_checked.py).
    case("run inputs strings", RUN + _inputs("strings.npz") + _params(ROWS)),
    case("run inputs bools", RUN + _inputs("bools.npz") + _params(ROWS)),
    case("run inputs objects", RUN + _inputs("objects.npz") + _params(ROWS)),
    case("run inputs a buffer missing", RUN + _inputs("missing.npz") + _params(ROWS)),
    case("run inputs a buffer extra", RUN + _inputs("extra.npz") + _params(ROWS)),
    # ---- run: the params ----
    case("run params not json", RUN + _inputs("good.npz") + ["--params", "{count"]),
    case("run params array", RUN + _inputs("good.npz") + ["--params", "[1, 2]"]),
    case("run params null", RUN + _inputs("good.npz") + ["--params", "null"]),
    case("run params number", RUN + _inputs("good.npz") + ["--params", "5"]),
    case("run params missing file", RUN + _inputs("good.npz") + ["--params", "{d}/nope.json"]),
    case("run params not text", RUN + _inputs("good.npz") + ["--params", "{d}/binary.wgsl"]),
    case("run params field missing", RUN + _inputs("good.npz") + ["--params", "{}"]),
    case("run params field unknown", RUN + _inputs("good.npz")
         + ["--params", '{"count": 4, "x": 1}']),
    case("run params negative", RUN + _inputs("good.npz") + _params(-1)),
    case("run params fraction", RUN + _inputs("good.npz") + _params(64.5)),
    case("run params huge", RUN + _inputs("good.npz") + _params(1e30)),
    case("run params past u32", RUN + _inputs("good.npz") + _params(2**32)),
    case("run params 26 digits", RUN + _inputs("good.npz") + _params(10**25)),
    case("run params text", RUN + _inputs("good.npz") + _params("4")),
    case("run params bool", RUN + _inputs("good.npz") + _params(True)),
    case("run params null field", RUN + _inputs("good.npz") + _params(None)),
    case("run params object field", RUN + _inputs("good.npz") + _params({"a": 1})),
    case("run params past the buffers", RUN + _inputs("good.npz") + _params(ROWS + 1)),
    case("run params nested deep", RUN + _inputs("good.npz")
         + ["--params", "[" * 100_000 + "]" * 100_000]),
    case("run params 5000 digits", RUN + _inputs("good.npz")
         + ["--params", '{"count": ' + "9" * 5000 + "}"]),
    # ---- check ----
    case("check no files", ["check"]),
    case("check missing file", ["check", "{d}/nope.wgsl"]),
    case("check not text", ["check", "{d}/binary.wgsl"]),
    case("check folder", ["check", "{d}/folder"]),
    case("check a file twice", ["check", "{d}/kernel.wgsl", "{d}/kernel.wgsl"]),
    case("check storage buffers 7", ["check", "{d}/kernel.wgsl", "--max-storage-buffers", "7"]),
    case("check storage buffers text", ["check", "{d}/kernel.wgsl", "--max-storage-buffers", "x"]),
    case("check syntax (a failed check)", ["check", "{d}/syntax.wgsl"], code=1),
    # ---- session ----
    case("session layers 0", ["session", "--layers", "0"]),
    case("session layers text", ["session", "--layers", "many"]),
    case("session layers a million", ["session", "--layers", "1000000", "--backend", "interp"]),
    case("session steps negative", ["session", "--steps", "-1"]),
    case("session batch 0", ["session", "--batch", "0"]),
    case("session kv heads 0", ["session", "--kv-heads", "0"]),
    case("session head dim 12", ["session", "--head-dim", "12", "--backend", "interp"]),
    case("session format", ["session", "--format", "bf16"]),
    case("session model", ["session", "--model", "gpt5", "--backend", "interp"]),
    case("session scenario", ["session", "--scenario", "chat"]),
    case("session layout", ["session", "--layout", "ring"]),
    case("session seed negative", ["session", "--seed", "-1"]),
    case("session seed fraction", ["session", "--seed", "1.5"]),
    case("session prompt past the capacity", ["session", "--prompt", "50", "--capacity", "20",
                                              "--backend", "interp"]),
    case("session capacity past a binding", ["session", "--capacity", "300000",
                                             "--backend", "interp"]),
    case("session page size", ["session", "--layout", "paged", "--page-size", "24",
                               "--backend", "interp"]),
    case("session paged table too small", ["session", "--layout", "paged", "--capacity", "32",
              "--prompt", "16", "--steps", "40", "--backend", "interp"]),  # fmt: skip
    case("session paged template format", ["session", "--layout", "paged",
                                           "--format", "template_int8", "--backend", "interp"]),
    case("session csv not writable", ["session", "--backend", "interp", "--layers", "1",
         "--batch", "1", "--kv-heads", "1", "--head-dim", "8", "--prompt", "2", "--steps", "1",
         "--csv", "{d}/a_file/steps.csv"]),  # fmt: skip
    # ---- legacy ----
    case("legacy without vars", ["legacy"]),
    case("legacy vars not json", ["legacy", "--vars", "{mode"]),
    case("legacy vars array", ["legacy", "--vars", "[1]"]),
    case("legacy vars null", ["legacy", "--vars", "null"]),
    case("legacy vars missing file", ["legacy", "--vars", "{d}/nope.json"]),
    case("legacy vars not text", ["legacy", "--vars", "{d}/binary.wgsl"]),
    case("legacy vars name too long", ["legacy", "--vars", "y" * 300]),
    case("legacy unknown variable", ["legacy", "--vars", json.dumps(COPY_VARS | {"bogus": 1})]),
    case("legacy unknown mode", ["legacy", "--vars", json.dumps(COPY_VARS | {"mode": "paint"})]),
    case("legacy missing variable", ["legacy", "--vars", json.dumps({"mode": "copy"})]),
    case("legacy head dim text", ["legacy", "--vars", json.dumps(COPY_VARS | {"headDim": "64"})]),
    case("legacy head dim list", ["legacy", "--vars", json.dumps(COPY_VARS | {"headDim": [64]})]),
    case("legacy head dim null", ["legacy", "--vars", json.dumps(COPY_VARS | {"headDim": None})]),
    case("legacy head dim fraction", ["legacy", "--vars",
                                      json.dumps(COPY_VARS | {"headDim": 64.5})]),
    case("legacy head dim negative", ["legacy", "--vars", json.dumps(COPY_VARS | {"headDim": -4})]),
    case("legacy head dim past a binding", ["legacy", "--vars",
         json.dumps(COPY_VARS | {"headDim": 67_108_864})]),  # fmt: skip
    case("legacy workgroup 1024", ["legacy", "--vars",
                                   json.dumps(COPY_VARS | {"copyWorkgroupSize": 1024})]),
    case("legacy storage buffers 7", ["legacy", "--vars", json.dumps(COPY_VARS),
                                      "--max-storage-buffers", "7"]),
    case("legacy storage buffers text", ["legacy", "--vars", json.dumps(COPY_VARS),
                                         "--max-storage-buffers", "ten"]),
    case("legacy subgroups without k norm", ["legacy", "--vars", json.dumps(COPY_VARS),
                                             "--subgroups"]),
    case("legacy vars nested deep", ["legacy", "--vars", "[" * 100_000 + "]" * 100_000]),
    case("legacy vars 5000 digits", ["legacy", "--vars",
         '{"mode": "copy", "headDim": ' + "9" * 5000 + "}"]),  # fmt: skip
    # ---- emit ----
    case("emit out under a file", ["emit", "--out", "{d}/a_file/emitted"]),
    case("emit unknown option", ["emit", "--fresh"]),
    case("emit a variant", ["emit", "copy_qwen25_05b"]),
    # ---- verify ----
    case("verify unknown variant", ["verify", "nope_variant"]),
    case("verify cases 0", ["verify", "copy_qwen25_05b", "--cases", "0"]),
    case("verify cases text", ["verify", "copy_qwen25_05b", "--cases", "three"]),
    case("verify seed negative", ["verify", "copy_qwen25_05b", "--seed", "-1"]),
    case("verify skip both", ["verify", "copy_qwen25_05b", "--skip", "gpu", "--skip", "interp"]),
    case("verify skip not a choice", ["verify", "copy_qwen25_05b", "--skip", "cpu"]),
    # ---- inputs ----
    case("inputs unknown variant", ["inputs", "copy_nope", "--case"]),
    case("inputs neither shape nor case", ["inputs", "copy_qwen25_05b"]),
    case("inputs shape not a number", ["inputs", "copy_qwen25_05b", "--shape", "rows=x"]),
    case("inputs shape unknown", ["inputs", "copy_qwen25_05b", "--shape", "batch=2"]),
    case("inputs shape huge", ["inputs", "copy_qwen25_05b", "--shape", "rows=999999999999"]),
    case("inputs case text", ["inputs", "copy_qwen25_05b", "--case", "one"]),
    case("inputs out a file", ["inputs", "copy_qwen25_05b", "--case", "--out", "{d}/good.npz"]),
    case("inputs-out not npz", ["inputs", "copy_qwen25_05b", "--case", "--inputs-out", "{d}/x.txt"]),
    # ---- list, show ----
    case("list two patterns", ["list", "copy", "merge"]),
    case("list unknown option", ["list", "--yaml"]),
    case("show no variant", ["show"]),
    case("show unknown variant", ["show", "transpose_nope"]),
    case("show a file", ["show", "{d}/kernel.wgsl"]),
    case("show two variants", ["show", "copy_qwen25_05b", "copy_llama31_8b"]),
]  # fmt: skip


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("bad")
    _files(d)
    return d


def _main(argv: list[str]) -> int:
    try:
        return cli.main(argv)
    except SystemExit as exit_:  # argparse's refusals
        return exit_.code


@pytest.mark.parametrize("argv, code", CASES)
def test_bad_input_is_one_line_in_words(folder, capsys, argv, code) -> None:
    argv = [a.replace("{d}", str(folder)) for a in argv]
    got = _main(argv)
    out = capsys.readouterr()
    lines = out.err.splitlines()
    assert got == code, (got, out.err, out.out[-2000:])
    if code == 1:  # a check's problems: on stdout, one line each
        assert out.err == "" and out.out
        text = out.out
    else:
        assert len(lines) == 1 or (len(lines) == 2 and HINT.match(lines[1])), out.err
        assert out.err.endswith("\n") and lines[0].startswith("kvdsl"), out.err
        text = out.err
    for own in OWN_WORDS:
        text = text.replace(own, "")
    assert not PYTHON.search(text), text


def test_traceback_shows_python_report(folder, capsys) -> None:
    """``--traceback`` is the one way to see the Python beneath a refusal."""
    with pytest.raises(Exception) as err:
        cli.main(["--traceback"] + RUN + ["--inputs", str(folder / "nope.npz")])
    assert "--inputs: no such file" in str(err.value)


#: JSON values as the refusals show them: JSON's words (null, true, false), never Python's.
JSON_WORDS = [
    (RUN + ["--inputs", "{d}/good.npz", "--params", "null"],
     "kvdsl run: --params: expected a JSON object of params fields, got null"),
    (RUN + ["--inputs", "{d}/good.npz", "--params", '{"count": true}'],
     "kvdsl run: params field 'count' is u32: got true, expected an integer"),
    (RUN + ["--inputs", "{d}/good.npz", "--params", '{"count": [false, null]}'],
     "kvdsl run: params field 'count' is u32: got [false, null], expected an integer"),
    (["legacy", "--vars", "false"],
     "kvdsl legacy: --vars: expected a JSON object of template variables, got false"),
    (["legacy", "--vars", json.dumps(COPY_VARS | {"headDim": None})],
     "kvdsl legacy: headDim=null: expected an integer"),
    (["legacy", "--vars", json.dumps(COPY_VARS | {"headDim": [None, True]})],
     "kvdsl legacy: headDim=[null, true]: expected an integer"),
    (["legacy", "--vars", json.dumps(COPY_VARS | {"mode": True})],
     "kvdsl legacy: mode=true: expected one of append_quant, build, build_quant, copy, merge, "
     "merge_share, transpose, window_shift"),
]  # fmt: skip


@pytest.mark.parametrize("argv, line", JSON_WORDS)
def test_json_values_are_shown_in_json_words(folder, capsys, argv, line) -> None:
    got = _main([a.replace("{d}", str(folder)) for a in argv])
    assert (got, capsys.readouterr().err) == (2, line + "\n")
