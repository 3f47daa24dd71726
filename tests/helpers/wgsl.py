"""WGSL texts for the frontend's tests, and what WGSL's compilers make of them."""

from __future__ import annotations

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


def assert_refused(text: str, filename: str, message: str) -> None:
    """kvdsl refuses ``text`` as invalid WGSL (not as valid WGSL outside its subset), with
    ``message`` in its error."""
    import pytest

    from kvdsl.frontend import FrontendError, UnsupportedError, parse

    with pytest.raises(FrontendError) as info:
        parse(text, filename)
    assert not isinstance(info.value, UnsupportedError), str(info.value)
    assert message in str(info.value), str(info.value)


def assert_taken(texts: dict[str, str]) -> None:
    """kvdsl reads each text (name → WGSL) and prints it back to the same IR, and neither naga
    nor Tint refuses any."""
    from kvdsl.emit import emit
    from kvdsl.frontend import parse

    for name, text in texts.items():
        k = parse(text, f"{name}.wgsl")
        assert parse(emit(k), f"{name}.wgsl") == k, name
    assert refused_by_compilers(texts) == {}
