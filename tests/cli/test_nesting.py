"""Text nested or sized past what kvdsl reads, through the commands that read it: a WGSL file
(``check``, ``run FILE.wgsl``) nested past Tint's depth or with an integer literal past 64
bits, and ``--params``/``--vars`` JSON nested past 128 levels or with an integer past 4,300
digits. Each is one located line (docs/errors.md); a file refused for its nesting is handed
to neither naga nor Tint, whose parsers would recurse through it."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from kvdsl import cli
from kvdsl.cli.check import NOT_RUN

HEAD = "@group(0) @binding(0) var<storage, read_write> o: array<i32>;\n"
BODY = "@compute @workgroup_size(1) fn main() { o[0] = i32("
RUN = ["run", "copy_qwen25_05b", "--backend", "interp"]


def kernel(expr: str) -> str:
    return HEAD + BODY + expr + "); }\n"


def _main(capsys, argv: list[str]) -> tuple[int, str, str]:
    code = cli.main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def inputs(tmp_path) -> str:
    path = tmp_path / "o.npz"
    np.savez(path, o=np.random.default_rng(5).integers(1, 1000, 4).astype(np.int32))
    return str(path)


def test_check_of_ten_thousand_parentheses_is_kvdsls_refusal_alone(tmp_path):
    # A process of its own: handed to naga, this text ended the process (naga's parser).
    src = tmp_path / "deep.wgsl"
    src.write_text(kernel("(" * 10_000 + "1" + ")" * 10_000))
    done = subprocess.run(
        [sys.executable, "-m", "kvdsl", "check", str(src)], capture_output=True, text=True
    )
    column = len(BODY) + 126 + 1  # the literal after the bracket that makes 128
    assert (done.returncode, done.stderr) == (1, ""), done
    assert done.stdout.splitlines() == [
        f"{src}:2:{column}: maximum parser recursive depth reached [kvdsl]",
        f"{src}: note: not given to naga or Tint: nested past what they take [kvdsl]",
        f"{src}: failed: checked by kvdsl's parser and verifier; not by naga (wgpu-native) or "
        "Tint (Dawn)",
        NOT_RUN,
        "0 passed, 1 failed",
    ]


def test_check_of_ten_thousand_terms_is_kvdsls_refusal_alone(tmp_path, capsys):
    src = tmp_path / "long.wgsl"
    src.write_text(kernel(" + ".join(["o[1]"] * 10_000)))
    code, out, err = _main(capsys, ["check", str(src)])
    lines = out.splitlines()
    assert (code, err, len(lines)) == (1, "", 5), out
    assert lines[0].startswith(f"{src}:2:") and "more than 512 operators" in lines[0]
    assert lines[2] == (
        f"{src}: failed: checked by kvdsl's parser and verifier; not by naga (wgpu-native) or "
        "Tint (Dawn)"
    )
    assert lines[0].endswith("[kvdsl]") and "[naga]" not in out and "[tint]" not in out


def test_check_of_a_literal_past_64_bits_words_it_as_tint_does(tmp_path, capsys):
    src = tmp_path / "big.wgsl"
    src.write_text(kernel("1" + "0" * 25))
    code, out, _ = _main(capsys, ["check", str(src)])
    assert code == 1
    assert f"{src}:2:{len(BODY) + 1}: value cannot be represented as 'abstract-int': " in out
    assert f":2:{len(BODY) + 1} error: value cannot be represented as 'abstract-int'" in out


@pytest.mark.parametrize("backend", ["interp", "gpu", "both"])
def test_run_of_a_file_nested_too_deep_is_one_located_line(tmp_path, capsys, inputs, backend):
    src = tmp_path / "deep.wgsl"
    src.write_text(kernel("(" * 10_000 + "1" + ")" * 10_000))
    argv = ["run", str(src), "--inputs", inputs, "--workgroups", "1,1,1", "--backend", backend]
    code, out, err = _main(capsys, argv)
    want = f"kvdsl run: {src}:2:{len(BODY) + 127}: maximum parser recursive depth reached\n"
    assert (code, out, err) == (2, "", want)


def test_run_takes_an_expression_of_512_operators(tmp_path, capsys, inputs):
    # Tint's expression depth: kvdsl parses, interprets and emits it (recursing past Python's
    # default limit, which the kvdsl command raises while it runs).
    src = tmp_path / "chain.wgsl"
    src.write_text(kernel(" + ".join(["o[1]"] * 513)))
    out = tmp_path / "out.npz"
    argv = ["run", str(src), "--inputs", inputs, "--workgroups", "1,1,1", "--out", str(out)]
    for backend in ("interp", "both"):
        code, _, err = _main(capsys, argv + ["--backend", backend])
        assert (code, err) == (0, ""), err
        o = np.load(inputs)["o"]
        assert np.load(out)["o"].tolist() == [513 * int(o[1])] + o[1:].tolist()
    assert sys.getrecursionlimit() < cli.RECURSION_LIMIT  # given back after the command


def test_params_nested_past_128_is_refused_at_the_bracket(capsys, inputs):
    deep = "[" * 100_000 + "]" * 100_000
    code, out, err = _main(capsys, RUN + ["--inputs", inputs, "--params", deep])
    want = (
        "kvdsl run: --params: JSON nested more than 128 deep (at column 129): params and "
        "template variables nest a few levels\n"
    )
    assert (code, out, err) == (2, "", want)
    # 128 deep is read (and refused for what it is); brackets inside text are text.
    code, _, err = _main(capsys, RUN + ["--inputs", inputs, "--params", "[" * 128 + "]" * 128])
    assert code == 2 and "expected a JSON object of params fields" in err, err
    text = json.dumps({"count": "[" * 500})
    code, _, err = _main(capsys, RUN + ["--inputs", inputs, "--params", text])
    assert code == 2 and "params field 'count' is u32: got '[[[" in err, err


def test_vars_file_nested_past_128_names_the_line(tmp_path, capsys):
    path = tmp_path / "vars.json"
    path.write_text('{"mode": "copy",\n "headDim": ' + "[" * 129 + "]" * 129 + "}\n")
    code, out, err = _main(capsys, ["legacy", "--vars", str(path)])
    # The object's brace is the first level: its 128th bracket is the 129th level.
    want = (
        "kvdsl legacy: --vars: JSON nested more than 128 deep (at line 2 column 140): params "
        "and template variables nest a few levels\n"
    )
    assert (code, out, err) == (2, "", want)


@pytest.mark.parametrize(
    "argv, what",
    [
        (RUN + ["--params", '{"count": ' + "9" * 5000 + "}"], "kvdsl run: --params"),
        (["legacy", "--vars", '{"mode": "copy", "headDim": -' + "9" * 5000 + "}"],
         "kvdsl legacy: --vars"),
    ],
    ids=["params", "vars"],
)  # fmt: skip
def test_json_integers_past_4300_digits_are_refused_at_their_column(capsys, inputs, argv, what):
    argv = argv[:4] + ["--inputs", inputs] + argv[4:] if argv[0] == "run" else argv
    code, out, err = _main(capsys, argv)
    column = argv[-1].index("9") + 1 - (argv[-1][argv[-1].index("9") - 1] == "-")
    want = (
        f"{what}: a number of 5,000 digits (at column {column}): no params field or template "
        "variable holds a number past 20 digits\n"
    )
    assert (code, out, err) == (2, "", want)
