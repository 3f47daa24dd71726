"""The WGSL conformance cases: each file under ``tests/frontend/cases/<topic>/`` is a module whose
header says what kvdsl makes of it (it takes it and prints it back to the same IR, or refuses it
with a stated error), and what Tint (Dawn, in a worker) and, where named, naga make of it
(``tests.helpers.wgsl.Case`` reads the header). Where kvdsl takes a text both compilers asked
must take it; kvdsl may be stricter than WGSL (its subset, its rules), and the header then
records that Tint takes what kvdsl refuses."""

from __future__ import annotations

import pytest

from kvdsl.emit import emit
from kvdsl.frontend import (
    FrontendError,
    UnsupportedError,
    WgslSyntaxError,
    WgslTypeError,
    parse,
)
from tests.helpers.wgsl import Case, read_case, read_cases

CASES = read_cases()
ERRORS = {
    "refused": FrontendError,
    "outside": UnsupportedError,
    "syntax error": WgslSyntaxError,
    "type error": WgslTypeError,
}


def _ids(cases: list[Case]) -> list[str]:
    return [c.name for c in cases]


@pytest.fixture(scope="module")
def tint() -> dict[str, str | None]:
    """Tint's verdict on every case, in one worker."""
    from kvdsl.runtime import tint_check

    return tint_check({c.name: c.text for c in CASES})


def test_the_cases_cover_each_verdict():
    kinds = {c.kind for c in CASES}
    assert kinds == set(ERRORS) | {"taken"}
    # The hand-written edge cases hold a good share of valid text, not only refusals.
    assert sum(c.kind == "taken" for c in CASES if c.name.startswith("wgsl_edges/")) > 15


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_kvdsl(case: Case):
    if case.kind == "taken":
        k = parse(case.text, case.filename)
        assert parse(emit(k), case.filename) == k
        return
    with pytest.raises(ERRORS[case.kind]) as info:
        parse(case.text, case.filename)
    err = info.value
    if case.kind == "refused":
        assert not isinstance(err, UnsupportedError), str(err)
    if case.line is None:
        assert case.message in str(err), str(err)
        return
    place = f"{case.line}" if case.column is None else f"{case.line}:{case.column}"
    assert (err.line, err.column if case.column else None) == (case.line, case.column)
    if case.kind == "outside":
        assert err.construct == case.message
        want = f"{case.message} is outside the supported WGSL subset"
    else:
        assert err.message == case.message
        want = case.message
    assert str(err) == f"{case.filename}:{place}: {want}"


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_tint(case: Case, tint):
    verdict, word = case.tint
    got = tint[case.name]
    if verdict == "taken":
        assert got is None, got
    else:
        assert got is not None, "Tint takes it"
        assert word is None or word in got, got


NAGA = [c for c in CASES if c.naga is not None]


@pytest.mark.parametrize("case", NAGA, ids=_ids(NAGA))
def test_naga(case: Case):
    from kvdsl.runtime import CompileError, compile_wgsl

    if case.naga == "taken":
        compile_wgsl(case.text)
    else:
        with pytest.raises(CompileError):
            compile_wgsl(case.text)


def test_what_kvdsl_takes_the_compilers_take():
    # A subgroup builtin without `enable subgroups;` is taken (the printer writes the directive
    # back); Tint asks for the directive.
    taken = [c for c in CASES if c.kind == "taken"]
    refused = {c.name for c in taken if c.tint[0] == "refused" or c.naga == "refused"}
    assert refused == {"wgsl_edges/subgroup_size_no_enable"}


def test_a_header_is_read_and_a_frame_filled(tmp_path):
    (tmp_path / "_frame.wgsl").write_text("// {head}\nfn main() {\n// {body}\n}\n")
    case = tmp_path / "c.wgsl"
    case.write_text(
        '// expect: refused "a \\"quoted\\" part"\n// tint: refused "x"\n// in: _frame.wgsl\n'
        "const A = 1u;\n// {body}\n  let b = A;\n"
    )
    got = read_case(case, tmp_path)
    assert (got.name, got.kind, got.message, got.tint, got.naga) == (
        "c",
        "refused",
        'a "quoted" part',
        ("refused", "x"),
        None,
    )
    assert got.text == "const A = 1u;\nfn main() {\n  let b = A;\n}\n"
    for header in (
        "// expect: taken",  # no Tint verdict
        '// expect: maybe "x"\n// tint: taken',
        '// expect: taken "x"\n// tint: taken',  # what kvdsl takes has no message
        '// expect: refused at 3 "x"\n// tint: taken',  # a place for an error that has none
        '// expect: taken\n// tint: taken "x"',
        "// expect: taken\n// tint: taken\n// naga: maybe",
    ):
        case.write_text(header + "\nfn main() {\n}\n")
        with pytest.raises(ValueError, match="c.wgsl"):
            read_case(case, tmp_path)
