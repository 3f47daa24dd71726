"""kvdsl's own limits: the refusals docs/grammar.md lists under "Refusals Tint does not make",
each a module kvdsl refuses and Tint takes. A limit lifted fails here, and its row and case go;
every other refusal of the frontend is one Tint makes too (the conformance cases hold Tint's
verdict beside kvdsl's)."""

from __future__ import annotations

import pytest

from kvdsl.frontend import FrontendError, parse
from kvdsl.runtime import tint_check

O = "@group(0) @binding(0) var<storage, read_write> out: array<u32>;\n"


def k(body: str, head: str = "") -> str:
    return (
        O
        + head
        + "@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
        + body
        + "\n}\n"
    )


LIMITS = {
    # Tint takes a storage texture of a format WebGPU binds only under a feature where unused.
    "an_unused_bgra8unorm_storage_texture": k(
        "  out[0] = 1u;", "@group(0) @binding(1) var t: texture_storage_2d<bgra8unorm, write>;\n"
    ),
}


def test_each_limit_kvdsl_keeps_is_one_tint_does_not_make():
    for name, text in LIMITS.items():
        with pytest.raises(FrontendError):
            parse(text, f"{name}.wgsl")
    assert {n: e for n, e in tint_check(LIMITS).items() if e is not None} == {}
