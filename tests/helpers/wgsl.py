"""WGSL texts for the frontend's tests, what WGSL's compilers make of them, and the conformance
cases (``tests/frontend/cases/``) with their expectation headers."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

HEAD = "@group(0) @binding(0) var<storage, read_write> out: array<u32>;\n"


def kernel(body: str, head: str = HEAD) -> str:
    """A module around ``body``: the body starts on line 4 (line 2 with an empty ``head``)."""
    return (
        head
        + "@compute @workgroup_size(64)\n"
        + "fn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
        + body
        + "\n  out[0u] = 1u;\n}\n"
    )


def scale_kernel(fields: str, value: str) -> str:
    """A module of ``src`` (read) and ``dst`` (read_write) f32 arrays and uniform ``params``
    (``struct Params { fields }``): ``dst[i] = value`` for each ``i < params.n``."""
    return (
        f"struct Params {{ {fields} }}\n"
        "@group(0) @binding(0) var<storage, read> src: array<f32>;\n"
        "@group(0) @binding(1) var<storage, read_write> dst: array<f32>;\n"
        "@group(0) @binding(2) var<uniform> params: Params;\n"
        "@compute @workgroup_size(64)\n"
        "fn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
        "  let i = gid.x;\n"
        f"  if (i < params.n) {{ dst[i] = {value}; }}\n"
        "}\n"
    )


def refused_by_compilers(
    texts: dict[str, str], limits: dict[str, dict[str, int]] | None = None
) -> dict[str, str]:
    """Name → why, for each WGSL text naga (this process's wgpu-native) or Tint (a Dawn
    worker on its Null backend) refuses, each on a device with the ``limits`` given for it past
    WebGPU's defaults (by name; none where absent)."""
    from kvdsl.runtime import CompileError, compile_wgsl, tint_check

    limits = limits or {}
    refused = {}
    for name, text in texts.items():
        try:
            compile_wgsl(text, limits.get(name))
        except CompileError as err:
            refused[name] = f"naga: {err}"
    checked = tint_check(texts, limits=limits)
    return refused | {n: f"tint: {e}" for n, e in checked.items() if e is not None}


def printed_back(text: str) -> str:
    """``text`` as kvdsl prints it, having asserted that the print reads back to the same IR."""
    from kvdsl.emit import emit
    from kvdsl.frontend import parse

    k = parse(text)
    printed = emit(k)
    assert parse(printed) == k
    return printed


def assert_buffers(got: dict, want: dict) -> None:
    """Each buffer ``want`` names holds in ``got`` what it holds in ``want``."""
    import numpy as np

    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def assert_tint_takes(texts: dict[str, str]) -> None:
    """Tint takes each text (name → WGSL)."""
    from kvdsl.runtime import tint_check

    assert {n: e for n, e in tint_check(texts).items() if e is not None} == {}


def assert_tint_takes_them_and_their_prints(texts: dict[str, str]) -> None:
    """Tint takes each text (name → WGSL), and neither Tint nor naga refuses kvdsl's print of
    it."""
    from kvdsl.emit import emit
    from kvdsl.frontend import parse

    assert_tint_takes(texts)
    prints = {f"{n}_printed": emit(parse(t, f"{n}.wgsl")) for n, t in texts.items()}
    assert refused_by_compilers(prints) == {}


def assert_refused(text: str, filename: str, message: str) -> None:
    """kvdsl refuses ``text`` as invalid WGSL (not as valid WGSL outside its subset), with
    ``message`` in its error."""
    import pytest

    from kvdsl.frontend import FrontendError, UnsupportedError, parse

    with pytest.raises(FrontendError) as info:
        parse(text, filename)
    assert not isinstance(info.value, UnsupportedError), str(info.value)
    assert message in str(info.value), str(info.value)


def assert_refused_as_tint_refuses(text: str, error: type, match: str) -> None:
    """kvdsl refuses ``text`` with ``error`` (a message ``match`` finds), and Tint refuses it."""
    import pytest

    from kvdsl.frontend import parse
    from kvdsl.runtime import tint_check

    with pytest.raises(error, match=match):
        parse(text)
    assert tint_check({"refused": text})["refused"] is not None


def assert_taken(texts: dict[str, str]) -> None:
    """kvdsl reads each text (name → WGSL) and prints it back to the same IR, and neither naga
    nor Tint refuses any."""
    from kvdsl.emit import emit
    from kvdsl.frontend import parse

    for name, text in texts.items():
        k = parse(text, f"{name}.wgsl")
        assert parse(emit(k), f"{name}.wgsl") == k, name
    assert refused_by_compilers(texts) == {}


#: The folder of WGSL conformance cases (``tests/frontend/test_wgsl_cases.py`` runs them).
CASES = Path(__file__).resolve().parents[1] / "frontend" / "cases"

#: What kvdsl makes of a case: it takes it, or refuses it with one of these errors.
KINDS = ("taken", "refused", "outside", "syntax error", "type error")

_EXPECT = re.compile(
    r"(?P<kind>taken|refused|outside|syntax error|type error)"
    r'(?: at (?P<line>\d+)(?::(?P<column>\d+))?)?(?: "(?P<text>(?:[^"\\]|\\.)*)")?'
)
_COMPILER = re.compile(r'(?P<verdict>taken|refused)(?: "(?P<word>(?:[^"\\]|\\.)*)")?')


@dataclass(frozen=True)
class Case:
    """One WGSL file under :data:`CASES` and what its header says each reader makes of it.

    ``// expect:`` is kvdsl's verdict: ``taken`` (it parses and prints back to the same IR), or
    ``refused`` (invalid WGSL: a :class:`FrontendError` that is not an
    :class:`UnsupportedError`), ``outside`` (valid WGSL outside the subset), ``syntax error``
    or ``type error``, with a quoted part of the message; given ``at LINE[:COLUMN]``, the
    quoted text is the whole message (an ``outside`` one's construct) at that place in the file.
    ``// tint:`` and ``// naga:`` are ``taken`` or ``refused``, Tint's refusal with an optional
    quoted part of its message; naga is asked only where a header names it (it aborts on some
    valid texts: a function pointer to an array's element passed to a helper).
    ``// in: FRAME`` (a path from the case's folder) puts the case into a frame, a module whose
    line ``// {head}`` the case's lines before its line ``// {body}`` replace, and whose line
    ``// {body}`` the lines after it (all the case's lines where it has no such line) replace:
    the case then holds only what it tests. Frames are the files whose names start with ``_``;
    a framed case states no place (``at``), since its lines are not the module's."""

    name: str  # topic/file, without .wgsl
    text: str
    kind: str
    message: str | None
    line: int | None
    column: int | None
    tint: tuple[str, str | None]
    naga: str | None

    @property
    def filename(self) -> str:
        return self.name.rsplit("/", 1)[-1] + ".wgsl"


def _unquote(text: str | None) -> str | None:
    return None if text is None else re.sub(r"\\(.)", r"\1", text)


def read_case(path: Path, root: Path = CASES) -> Case:
    """The case in ``path`` (named by its place under ``root``); a header this reader cannot
    read is an error naming the file."""
    # Bytes, not read_text: a case's line breaks (CR, U+2028, ...) are part of what it tests.
    text = path.read_bytes().decode()
    fields: dict[str, str] = {}
    lines = text.split("\n")
    header = 0
    for line in lines:
        head = re.fullmatch(r"// (expect|tint|naga|in): (.*)", line)
        if head is None or head[1] in fields:
            break
        fields[head[1]] = head[2]
        header += 1
    name = path.relative_to(root).with_suffix("").as_posix()
    if "in" in fields:
        text = _framed(path.parent / fields["in"], "\n".join(lines[header:]), name)
    expect = _EXPECT.fullmatch(fields.get("expect", ""))
    tint = _COMPILER.fullmatch(fields.get("tint", ""))
    naga = fields.get("naga")
    if expect is None or tint is None or tint["word"] and tint["verdict"] == "taken":
        raise ValueError(
            f"{name}.wgsl: the header is '// expect: VERDICT' then '// tint: taken' or "
            f"'// tint: refused [\"part of its message\"]' (VERDICT one of {', '.join(KINDS)}, "
            f'refusals with a quoted "part of the message"), got {fields}'
        )
    if naga not in (None, "taken", "refused"):
        raise ValueError(f"{name}.wgsl: '// naga:' is taken or refused, got {naga!r}")
    if (expect["kind"] == "taken") != (expect["text"] is None) or (
        expect["line"]
        and (expect["kind"] not in ("syntax error", "type error", "outside") or "in" in fields)
    ):
        raise ValueError(f"{name}.wgsl: '// expect: {fields['expect']}' is not a verdict")
    return Case(
        name,
        text,
        expect["kind"],
        _unquote(expect["text"]),
        int(expect["line"]) if expect["line"] else None,
        int(expect["column"]) if expect["column"] else None,
        (tint["verdict"], _unquote(tint["word"])),
        naga,
    )


def _framed(frame: Path, own: str, name: str) -> str:
    """The module ``own`` (a case's lines after its header) makes in ``frame``."""
    head, marker, body = own.partition("// {body}\n")
    if not marker:
        head, body = "", own
    text = frame.read_bytes().decode()
    if "// {body}\n" not in text or head and "// {head}\n" not in text:
        raise ValueError(f"{name}.wgsl: the frame {frame.name} has no line for its head or body")
    return text.replace("// {head}\n", head).replace("// {body}\n", body)


def read_cases() -> list[Case]:
    """Every case under :data:`CASES` (not the frames), by name."""
    paths = sorted(p for p in CASES.rglob("*.wgsl") if not p.name.startswith("_"))
    return [read_case(p) for p in paths]
