"""The command line as people use it: filtering ``list``, a near name for a misspelt variant,
what ``check`` ran, the columns explained, a ``--tol`` hint, the file ``run --out`` wrote, options
checked before a session runs, and messages that name the option or variable in JSON's words."""

from __future__ import annotations

import fnmatch
import json
import subprocess
import sys
from argparse import Namespace

import numpy as np
import pytest

from kvdsl import catalog, cli
from kvdsl.cli import session as session_cli
from kvdsl.cli import verify as verify_cli
from kvdsl.cli.check import NOT_RUN
from kvdsl.cli.run import _agreement, least_tol, tol_hint
from kvdsl.session import SessionError, Spec
from tests.helpers.paths import ROOT


def kvdsl(capsys, *argv: str) -> tuple[int, str, str]:
    """``kvdsl ARGV`` in this process: its exit code, stdout and stderr."""
    try:
        code = cli.main(list(argv))
    except SystemExit as err:  # argparse's refusals
        code = err.code
    out = capsys.readouterr()
    return code, out.out, out.err


# ---- kvdsl list [PATTERN] [--mode M] ----------------------------------------------------------


@pytest.mark.parametrize(
    "pattern, mode",
    [("int4", "paged_append"), ("*_sg_*", None), (None, "attend"), ("llama31_8b", "qkv")],
)
def test_list_filters_by_pattern_and_mode(capsys, pattern, mode):
    args = ([pattern] if pattern else []) + (["--mode", mode] if mode else [])
    code, out, err = kvdsl(capsys, "list", *args)
    want = [
        n
        for n, cfg in catalog.VARIANTS.items()
        if (mode is None or cfg.mode == mode)
        and (
            pattern is None or (fnmatch.fnmatchcase(n, pattern) if "*" in pattern else pattern in n)
        )
    ]
    assert (code, err) == (0, "") and want
    lines = out.splitlines()
    assert [line.split()[0] for line in lines] == want
    assert all(line.split()[1] == catalog.config(line.split()[0]).mode for line in lines)
    code, out, _ = kvdsl(capsys, "list", "--json", *args)
    assert code == 0 and list(json.loads(out)) == want


def test_list_of_an_unknown_mode_names_the_modes(capsys):
    code, out, err = kvdsl(capsys, "list", "--mode", "atend")
    assert (code, out) == (2, "")
    assert err == (
        "kvdsl list: --mode='atend' (did you mean 'attend'?): expected one of "
        + ", ".join(sorted(catalog.MODES))
        + "\n"
    )


def test_list_matching_nothing_says_so(capsys):
    code, out, err = kvdsl(capsys, "list", "no_such_thing", "--mode", "copy")
    assert (code, out) == (0, "")
    assert err == "kvdsl list: no variant matches 'no_such_thing' --mode copy\n"


# ---- did you mean --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, hint",
    [
        ("copy_lama31_8b", "; did you mean 'copy_llama31_8b' or 'copy_f16_llama31_8b' or "
         "'copy_llama32_1b'?"),
        ("paged_apend", "; did you mean a variant beginning 'paged_append' (`kvdsl list "
         "paged_append`)?"),
        ("nope", ""),
    ],
)  # fmt: skip
def test_an_unknown_variant_gets_the_names_near_it(capsys, name, hint):
    code, out, err = kvdsl(capsys, "show", name)
    assert (code, out) == (2, "")
    assert err == f"kvdsl show: unknown variant {name!r}{hint} (see `kvdsl list`)\n"
    prefix = hint.partition("beginning '")[2].partition("'")[0]
    if prefix:  # the list the hint names holds variants
        assert kvdsl(capsys, "list", prefix)[1]


# ---- kvdsl check says what ran --------------------------------------------------------------

VERTEX = """@vertex
fn main() -> @builtin(position) vec4<f32> {
  return vec4<f32>(0.0, 0.0, 0.0, 1.0);
}
"""
FRAGMENT = """@fragment
fn main() -> @location(0) vec4<f32> {
  return vec4<f32>(1.0);
}
"""


def test_check_names_each_files_checkers_and_that_it_runs_nothing(tmp_path, capsys):
    good = ROOT / "emitted" / "copy_llama31_8b.wgsl"
    bad = tmp_path / "bad.wgsl"
    bad.write_text(good.read_text().replace("fn main(", "fn main(x: u32, ", 1))
    code, out, err = kvdsl(capsys, "check", str(good), str(bad))
    assert (code, err) == (1, "")
    lines = out.splitlines()
    both = "checked by kvdsl's parser and verifier, naga (wgpu-native) and Tint (Dawn)"
    assert lines[-4:] == [
        f"{good}: passed: {both}",
        f"{bad}: failed: {both}",
        NOT_RUN,
        "1 passed, 1 failed",
    ]
    assert "races" in NOT_RUN and "out-of-bounds" in NOT_RUN


@pytest.mark.parametrize("stage, text", [("vertex", VERTEX), ("fragment", FRAGMENT)])
def test_a_render_shader_is_refused_as_compute_only(tmp_path, capsys, stage, text):
    src = tmp_path / f"{stage}.wgsl"
    src.write_text(text)
    code, out, _ = kvdsl(capsys, "check", str(src))
    assert code == 1
    assert out.splitlines()[0] == (
        f"{src}:1:1: a @{stage} entry point (kvdsl takes compute entry points only: @compute) "
        "is outside the supported WGSL subset [kvdsl]"
    )
    code, _, err = kvdsl(capsys, "run", str(src), "--inputs", str(src), "--workgroups", "1,1,1")
    assert code == 2  # --inputs is checked after the file: the file's refusal comes first
    assert "compute entry points only" in err


def test_control_characters_are_shown_escaped(tmp_path, capsys):
    src = tmp_path / "ctl.wgsl"
    src.write_text("@compute @workgroup_size(1)\nfn main() {\n  let x = 1;\x01\u200b\n}\n")
    code, out, err = kvdsl(capsys, "check", str(src))
    assert (code, err) == (1, "")
    assert "\x01" not in out and "\u200b" not in out
    assert out.splitlines()[0] == f"{src}:3:13: unexpected character '\\x01' (U+0001) [kvdsl]"
    assert any("[naga]" in line and "\\x01" in line for line in out.splitlines())


# ---- the columns explained -------------------------------------------------------------------


def test_session_explains_its_columns(capsys):
    code, out, err = kvdsl(
        capsys, "session", "--backend", "interp", "--layers", "1", "--steps", "3", "--batch",
        "3", "--kv-heads", "1", "--head-dim", "8", "--prompt", "2", "--format", "f32",
    )  # fmt: skip
    assert (code, err) == (0, "")
    lines = out.splitlines()
    decode = next(line for line in lines if line.startswith("decode"))
    assert decode.split()[1:3] == ["3", "3"]  # three steps of one token per sequence, batch 3
    assert lines[-2] == session_cli.COLUMNS
    assert "each sequence (not times the batch" in session_cli.COLUMNS


def test_verify_explains_its_columns(capsys):
    code, out, err = kvdsl(capsys, "verify", "copy_llama31_8b", "--cases", "1", "--skip", "gpu")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert "max error" in lines[0] and lines[-2] == verify_cli.COLUMNS
    assert "max error:" in verify_cli.COLUMNS


# ---- run: the --tol hint, the file --out wrote, --constants --------------------------------


def test_a_tol_hint_where_only_floats_differ():
    rng = np.random.default_rng(3)
    want = rng.uniform(0.25, 2, 64).astype(np.float32) * rng.choice([-1, 1], 64)
    got = want.copy()
    got[[5, 9]] = np.nextafter(got[[5, 9]], np.float32(np.inf))
    got[20] *= np.float32(1.001)
    need = least_tol(got, want)
    hint = tol_hint([need, 0.0])
    tol = float(hint.split("--tol ")[1].split()[0])
    assert hint.startswith("only floats differ, by at most") and tol >= need
    assert _agreement("x", got, want, tol)[0]
    assert not _agreement("x", got, want, need * 0.99)[0]
    words = np.arange(4, dtype=np.uint32)
    assert tol_hint([need, least_tol(words + 1, words)]) is None  # integers differ too
    nan = want.copy()
    nan[0] = np.nan
    assert tol_hint([least_tol(nan, want)]) is None  # no tolerance accepts a NaN
    zeros = np.float32([0.0, -0.0])
    assert tol_hint([least_tol(zeros, zeros[::-1])]).endswith("--tol 1e-09 accepts them")


@pytest.fixture
def counted(tmp_path):
    """A WGSL file with an override and the inputs of a run of it."""
    src = tmp_path / "scaled.wgsl"
    src.write_text(
        "@id(3) override SCALE: u32 = 2u;\n"
        "@group(0) @binding(0) var<storage, read_write> out: array<u32>;\n"
        "@compute @workgroup_size(4)\n"
        "fn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
        "  out[gid.x] = gid.x * SCALE + 1u;\n"
        "}\n"
    )
    np.savez(tmp_path / "in.npz", out=np.full(4, 0xDEAD, np.uint32))
    return src, tmp_path / "in.npz"


@pytest.mark.parametrize("name", ["result", "result.npz"])
def test_run_out_reports_the_file_it_wrote(tmp_path, capsys, counted, name):
    src, inputs = counted
    out_name = str(tmp_path / name)
    code, out, err = kvdsl(capsys, "run", str(src), "--inputs", str(inputs), "--workgroups",
                           "1,1,1", "--backend", "interp", "--out", out_name)  # fmt: skip
    written = tmp_path / "result.npz"
    assert (code, err) == (0, "") and out == f"wrote out to {written}\n"
    assert np.load(written)["out"].tolist() == [1, 3, 5, 7]


@pytest.mark.parametrize(
    "constants, message",
    [
        (["SCALE=3", "SCALE=4"], "--constants: SCALE is given twice (SCALE=3 and SCALE=4): give "
         "each override one value"),
        (["SCALE=3,3=5"], "{src}:1:17: constants: override SCALE is given twice, by name "
         "(SCALE=3) and by its @id (3=5): give it one value"),
    ],
)  # fmt: skip
def test_one_override_given_twice_is_refused(capsys, counted, constants, message):
    src, inputs = counted
    given = [a for c in constants for a in ("--constants", c)]
    code, out, err = kvdsl(
        capsys, "run", str(src), "--inputs", str(inputs), "--workgroups", "1,1,1", *given
    )
    assert (code, out) == (2, "")
    assert err == f"kvdsl run: {message.format(src=src)}\n"


# ---- session options checked before the run ---------------------------------------------------

SMALL = ["--backend", "interp", "--layers", "1", "--steps", "1", "--kv-heads", "1",
         "--head-dim", "8", "--prompt", "2"]  # fmt: skip


@pytest.mark.parametrize("where", ["{d}", "{d}/no/such/folder/steps.csv"])
def test_session_csv_is_checked_before_the_run(tmp_path, capsys, where):
    path = where.format(d=tmp_path)
    code, out, err = kvdsl(capsys, "session", *SMALL, "--csv", path)
    why = "Is a directory" if path == str(tmp_path) else "No such file or directory"
    assert (code, out) == (2, "")  # nothing ran: not even the session's first line
    assert err == f"kvdsl session: --csv: cannot write {path!r} ({why})\n"


def test_session_batch_past_one_binding_names_the_most_that_fits(capsys):
    code, out, err = kvdsl(capsys, "session", "--batch", "1000000", "--layers", "1")
    assert (code, out) == (2, "")
    # llama31_8b's 8 kv heads of 384 rows (the prompt and the steps) of 128 f16 values: 786,432
    # bytes a sequence; 169 of them and one to spare fit 128 MiB, 170 and one do not.
    first = "kvdsl session: --batch=1000000 and capacity=384 (the prompt plus what the steps "
    assert err.startswith(first) and err.endswith("; give --batch at most 169\n"), err
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize("batch", [169, 170])
def test_the_most_batch_named_is_the_sessions_own_limit(batch):
    """The CLI's refusal agrees with the session's: 169 sequences fit, 170 do not."""
    from kvdsl.session import InterpHost, Session

    spec = Spec(1, batch, 8, 128, 384, "f16")
    args = Namespace(capacity=None)
    if batch == 169:
        session_cli._check_binding(args, spec)
        return
    with pytest.raises(cli.UsageError, match="give --batch at most 169"):
        session_cli._check_binding(args, spec)
    with pytest.raises(SessionError, match="past one binding"):
        Session(spec, InterpHost(), check_every=False)


# ---- messages: one line, the option, JSON's words --------------------------------------------


def test_an_unknown_option_is_one_line_and_a_hint(capsys):
    code, out, err = kvdsl(capsys, "list", "--bogus")
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        "kvdsl: error: unrecognized arguments: --bogus",
        "kvdsl: see 'kvdsl --help' for the options",
    ]


@pytest.fixture
def run_copy(tmp_path):
    """``kvdsl run copy_llama31_8b`` with inputs, less its --params."""
    rng = np.random.default_rng(1)
    src = rng.uniform(0.25, 2, 128).astype(np.float32)
    np.savez(tmp_path / "in.npz", **{n: src for n in ("src_k", "src_v")},
             present_key=np.full(128, np.nan, np.float32),
             present_value=np.full(128, np.nan, np.float32))  # fmt: skip
    return ["run", "copy_llama31_8b", "--inputs", str(tmp_path / "in.npz")]


def test_json_errors_say_the_line(tmp_path, capsys, run_copy):
    bad = tmp_path / "params.json"
    bad.write_text('{\n  "count": 1,\n  "seq": }\n')
    code, _, err = kvdsl(capsys, *run_copy, "--params", str(bad))
    assert code == 2
    assert err == (
        f"kvdsl run: --params: {str(bad)!r} is not valid JSON (Expecting value at line 3 "
        "column 10)\n"
    )
    code, _, err = kvdsl(capsys, *run_copy, "--params", '{"count": }')
    assert err == "kvdsl run: --params: not valid JSON (Expecting value at column 11)\n"


@pytest.mark.parametrize("option", ["--params", "--vars"])
def test_a_missing_file_is_no_such_file(tmp_path, capsys, run_copy, option):
    missing = str(tmp_path / "missing.json")
    argv = [*run_copy, option, missing] if option == "--params" else ["legacy", option, missing]
    code, _, err = kvdsl(capsys, *argv)
    assert code == 2
    command = argv[0]
    assert err == (
        f"kvdsl {command}: {option}: no such file {missing!r} (give a JSON file, or JSON text)\n"
    )


LEGACY = {"mode": "transpose", "kvNumHeads": 8, "headDim": 128, "copyWorkgroupSize": 64,
          "DISPATCH_FOLD_WIDTH": 65535}  # fmt: skip


@pytest.mark.parametrize(
    "change, message",
    [
        ({"kvNumHeads": None}, "kvNumHeads=null: expected an integer"),
        ({"presentVec4": None}, "presentVec4=null: expected true or false"),
        ({"kvNumHeads": True}, "kvNumHeads=true: expected an integer"),
        ({"DISPATCH_FOLD_WIDTH": 70000}, "DISPATCH_FOLD_WIDTH=70000: expected a positive "
         "integer <= 65535"),
        ({"copyWorkgroupSize": 1000}, "copyWorkgroupSize=1000: expected a positive integer <= "
         "256"),
        ({"kvNumHeads": 2**20, "headDim": 2**20}, "kvNumHeads * headDim=1099511627776: "
         "expected at most 33554432"),
    ],
)  # fmt: skip
def test_legacy_refusals_name_the_variable_in_jsons_words(capsys, change, message):
    code, out, err = kvdsl(capsys, "legacy", "--vars", json.dumps(LEGACY | change))
    assert (code, out) == (2, "")
    assert err.startswith(f"kvdsl legacy: {message}") and len(err.splitlines()) == 1, err


@pytest.mark.parametrize(
    "params, shown", [('{"count": true}', "true"), ('{"count": null}', "null")]
)
def test_params_are_shown_in_jsons_words(capsys, run_copy, params, shown):
    code, _, err = kvdsl(capsys, *run_copy, "--params", params)
    assert code == 2
    assert err == f"kvdsl run: params field 'count' is u32: got {shown}, expected an integer\n"


# ---- pytest -q shows its counts -------------------------------------------------------------


def test_pytest_q_shows_the_summary(tmp_path):
    """The project's pytest settings leave ``pytest -q`` its summary line (an ``addopts`` of
    ``-q`` made it ``-qq``, which prints none)."""
    (tmp_path / "test_two.py").write_text(
        "def test_yes():\n    assert True\n\n\ndef test_no():\n    assert False\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-c", str(ROOT / "pyproject.toml"),
         "--rootdir", str(tmp_path), "-p", "no:cacheprovider", str(tmp_path / "test_two.py")],
        capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stdout.splitlines()[-1].startswith("1 failed, 1 passed in "), done.stdout
