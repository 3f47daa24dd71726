"""kvdsl's own limits: the refusals docs/grammar.md would list under "Refusals Tint does not
make", each a module kvdsl refuses and Tint takes. There are none: every refusal of the frontend
is one Tint makes too (the conformance cases hold Tint's verdict beside kvdsl's). The modules of
the limits lifted stay here, each taken by kvdsl and by Tint."""

from __future__ import annotations

import re

import pytest

from kvdsl.frontend import FrontendError, parse
from kvdsl.runtime import tint_check
from tests.helpers.paths import ROOT

O = "@group(0) @binding(0) var<storage, read_write> out: array<u32>;\n"


def k(body: str, head: str = "") -> str:
    return (
        O
        + head
        + "@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
        + body
        + "\n}\n"
    )


#: kvdsl's own limits, by name: the module kvdsl refuses and Tint takes.
LIMITS: dict[str, str] = {}

#: The limits lifted, by name: a module kvdsl refused that Tint takes.
LIFTED = {
    # A storage texture of a format WebGPU binds only under a feature, where unused.
    "an_unused_bgra8unorm_storage_texture": k(
        "  out[0] = 1u;", "@group(0) @binding(1) var t: texture_storage_2d<bgra8unorm, write>;\n"
    ),
    # An extension other than f16 and subgroups.
    "enable_clip_distances": "enable clip_distances;\n" + k("  out[0] = 1u;"),
}


def _table_rows() -> list[str]:
    """The rows of docs/grammar.md's table under "Refusals Tint does not make"."""
    text = (ROOT / "docs" / "grammar.md").read_text()
    section = text.split("## Refusals Tint does not make", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    return [r for r in rows if not re.fullmatch(r"\|[ |-]*\|", r) and not r.startswith("| kvdsl")]


def test_each_limit_kvdsl_keeps_is_one_tint_does_not_make():
    assert len(_table_rows()) == len(LIMITS)  # one row of the table each
    for name, text in LIMITS.items():
        with pytest.raises(FrontendError):
            parse(text, f"{name}.wgsl")
    assert {n: e for n, e in tint_check(LIMITS).items() if e is not None} == {}


def test_the_limits_lifted_are_taken_by_kvdsl_and_tint():
    for name, text in LIFTED.items():
        parse(text, f"{name}.wgsl")
    assert tint_check(LIFTED) == dict.fromkeys(LIFTED)
