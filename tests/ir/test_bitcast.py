"""``bitcast<T>(e)``: the builder, the verifier, the emitter, the parser and the interpreter agree
that it reinterprets 32 bits (an inline f32 scale in a u32 cache row needs it)."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import interp
from kvdsl.emit import emit
from kvdsl.frontend import parse
from kvdsl.ir import BuildError, Dispatch, KernelBuilder, bitcast, f16, f32, i32, u32, vec
from kvdsl.ir import tree as ir

N = 8


def round_trip_kernel():
    """``words[i]`` → f32 → i32 → u32 bits → ``floats[i]``, and vec4 bitcasts of ``quads``."""
    kb = KernelBuilder("bits", N)
    words = kb.binding("words", u32, "read")
    floats = kb.binding("floats", f32, "read_write")
    ints = kb.binding("ints", i32, "read_write")
    quads = kb.binding("quads", vec(4, u32), "read_write")
    i = kb.let("i", kb.gid.x)
    x = kb.let("x", bitcast(f32, words[i]))
    floats[i] = x
    ints[i] = bitcast(i32, bitcast(u32, x))
    quads[i] = bitcast(vec(4, u32), bitcast(vec(4, f32), quads[i]) * 2.0)
    return kb.build(Dispatch(ir.Lit(N, u32), N, 1))


def test_bitcast_emits_parses_back_and_interprets_as_numpy_views():
    k = round_trip_kernel()
    text = emit(k)
    assert "bitcast<f32>(words[i])" in text and "bitcast<vec4<u32>>(" in text
    assert emit(parse(text)) == text
    rng = np.random.default_rng(7)
    values = rng.standard_normal(N).astype(np.float32)
    quads = rng.standard_normal((N, 4)).astype(np.float32)
    out = interp.run(
        k,
        {
            "words": values.view(np.uint32),
            "floats": np.full(N, np.nan, np.float32),
            "ints": np.full(N, -1, np.int32),
            "quads": quads.view(np.uint32).copy(),
        },
    )
    np.testing.assert_array_equal(out["floats"], values)
    np.testing.assert_array_equal(out["ints"], values.view(np.int32))
    np.testing.assert_array_equal(out["quads"].view(np.float32), quads * 2)


@pytest.mark.parametrize(
    "ty, make",
    [
        (f16, lambda kb: kb.param("n")),
        (vec(2, u32), lambda kb: kb.param("n")),
        (u32, lambda kb: kb.let("h", kb.gid.x) > 0),
    ],
)
def test_bitcast_refuses_what_is_not_32_bits_to_32_bits(ty, make):
    kb = KernelBuilder("bad", 1)
    with pytest.raises(BuildError, match="bitcast: takes a u32, i32 or f32"):
        bitcast(ty, make(kb))


def test_parsed_bitcast_is_typed_and_checked():
    head = "@compute @workgroup_size(1)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
    ok = parse(head + "  let x = bitcast<u32>(1.0);\n  let y = bitcast<f32>(x);\n}\n")
    assert "bitcast<f32>(x)" in emit(ok)
    with pytest.raises(ValueError, match="bitcast takes a u32, i32 or f32"):
        parse(head + "  let x = bitcast<vec2<u32>>(1u);\n}\n")
