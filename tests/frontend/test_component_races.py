"""Races on a storage buffer's vector elements are found per component, as WGSL's memory
locations are scalars: invocations writing (or one writing, another reading) different
components of one element do not race; the same component, or a whole element beside a
component another invocation wrote, does. The kernels that do not race run on the interpreter
and on the GPU (llvmpipe will do) over random non-zero inputs into a poisoned output, to what
numpy says."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import interp, runtime
from kvdsl.frontend import parse
from kvdsl.interp import RaceError
from kvdsl.runtime import tint_check

N = 128
POISON = 0xDEADBEEF
HEAD = (
    "@group(0) @binding(0) var<storage, read> a: array<u32>;\n"
    "@group(0) @binding(1) var<storage, read_write> out: array<vec4<u32>>;\n"
    "@compute @workgroup_size(64)\n"
    "fn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
    "  let i = gid.x;\n  let j = i / 4u;\n  let c = i % 4u;\n"
)


def kernel(body: str) -> str:
    return HEAD + body + "\n}\n"


def inputs() -> np.ndarray:
    return np.random.default_rng(4405).integers(1, 1 << 20, N, dtype=np.uint32)


def _run(text: str, backend) -> np.ndarray:
    bufs = {"a": inputs(), "out": np.full((N // 4, 4), POISON, np.uint32)}
    return backend.run(parse(text), bufs, {}, (N // 64, 1, 1))["out"]


#: name -> (text, numpy of a (as int64, one row per element: a.reshape(-1, 4)) -> out)
APART = {
    # Each invocation writes its own component, by index and by name.
    "components_by_index": (
        kernel("  out[j][c] = a[i] * 3u;"),
        lambda a: a * 3,
    ),
    "components_by_name": (
        kernel(
            "  switch c {\n    case 0u { out[j].x = a[i]; }\n    case 1u { out[j].y = a[i] + 1u; }\n"
            "    case 2u { out[j].z = a[i] + 2u; }\n    default { out[j].w = a[i] ^ 7u; }\n  }"
        ),
        lambda a: a + np.array([0, 1, 2, 0]) + np.array([0, 0, 0, 1]) * ((a ^ 7) - a),
    ),
    # Invocation 4k+1 reads component x, which 4k wrote, after a storageBarrier(); the others
    # read and write their own components around it.
    "component_read_after_a_barrier": (
        kernel(
            "  out[j][c] = a[i];\n  storageBarrier();\n"
            "  if (c == 1u) { out[j].y += out[j].x * 5u; }\n  if (c == 2u) { out[j].z += 9u; }"
        ),
        lambda a: a + np.array([0, 1, 0, 0]) * np.roll(a, 1, axis=1) * 5 + np.array([0, 0, 9, 0]),
    ),
}


def _want(name: str) -> np.ndarray:
    a = inputs().astype(np.int64).reshape(-1, 4)
    return (APART[name][1](a) & 0xFFFFFFFF).astype(np.uint32)


@pytest.mark.parametrize("name", APART)
def test_different_components_do_not_race_on_the_interpreter(name):
    np.testing.assert_array_equal(_run(APART[name][0], interp), _want(name))


@pytest.mark.parametrize("name", APART)
def test_different_components_on_the_gpu_are_what_numpy_says(name, gpu):
    np.testing.assert_array_equal(_run(APART[name][0], runtime), _want(name))


def test_tint_takes_the_kernels_that_do_not_race():
    texts = {n: t for n, (t, _) in APART.items()}
    assert tint_check(texts) == {n: None for n in texts}


#: name -> (text, what the race names)
RACES = {
    "one_component_twice": (kernel("  out[j].y = a[i];"), r"out\[0\]\.y: invocation gid=\("),
    "one_component_by_index_twice": (kernel("  out[j][1] = a[i];"), r"out\[0\]\.y: "),
    "a_whole_element_then_a_component": (
        kernel("  if (c == 0u) { out[j] = vec4<u32>(a[i]); } else { out[j].z = 1u; }"),
        r"out\[0\]\.z: .* wrote it in `out\[j\] = vec4<u32>\(a\[i\]\)`",
    ),
    "a_component_read_another_wrote": (
        kernel("  out[j][c] = a[i];\n  out[j][c] += out[j].w;"),
        r"out\[0\]\.w: .* reads it",
    ),
    "a_whole_element_read_of_components_others_wrote": (
        kernel("  out[j][c] = a[i];\n  let v = out[j];\n  out[j][c] = v.x + v.w;"),
        r"out\[0\]\.[xyzw]: ",
    ),
}


@pytest.mark.parametrize("name", RACES)
def test_the_same_component_races(name):
    text, words = RACES[name]
    with pytest.raises(RaceError, match=words):
        _run(text, interp)
