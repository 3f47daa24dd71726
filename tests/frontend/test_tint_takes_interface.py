"""Modules Tint takes that kvdsl takes too: a call (a helper's call statement or a phony
assignment of one) as a ``for`` loop's initialiser or update (the loop as WGSL defines it);
``@builtin(workgroup_index)`` and ``@builtin(global_invocation_index)``, which naga does not
know (each a ``let`` at the top of the entry point, of WGSL's definition over the builtins naga
knows, non-uniform to the uniformity analysis as to Tint's); ``@location`` and
``@interpolate`` on a member of a struct that is no stage's input or output (checked as Tint
checks them, and dropped); a storage buffer at a slot another takes that the entry point does
not use (out of the kernel's interface, as out of WGSL's pipeline layout); ``arrayLength(p)``
of a pointer to a runtime-sized array in storage; ``@builtin(subgroup_id)`` and
``num_subgroups`` (subgroups as runs of local invocation indices, as the interpreter lays them
out and llvmpipe does). Each
kernel runs on the interpreter and on the GPU (llvmpipe will do) over random non-zero inputs
into a poisoned output, to what numpy says; each prints back to the same IR, Tint takes the
text, and Tint and naga its print. The member IO attributes Tint refuses kvdsl refuses with
Tint's words: the cases under ``tests/frontend/cases/member_io_attributes/``."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import interp, runtime
from kvdsl.emit import emit
from kvdsl.frontend import parse
from kvdsl.runtime import tint_check
from tests.helpers.forms import (
    ENTRY,
    HEAD,
    N,
    POISON,
    assert_form_runs_as_numpy_says,
    inputs,
    kernel,
)
from tests.helpers.wgsl import (
    assert_refused,
    assert_tint_takes_them_and_their_prints,
)

SEED = 4405


#: name -> (WGSL text, numpy of the input array a (as int64) -> out, workgroups)
CASES: dict[str, tuple[str, object, tuple[int, int, int]]] = {}


def _for_calls(a: np.ndarray) -> np.ndarray:
    out = np.zeros(N, np.int64)
    for j, x in enumerate(a):
        b = x & 7
        c, n = b, 0  # the initialiser's call
        while c < b + 5:
            n += c
            if c != b + 2:  # the trip that continues still runs the update
                n += 100
            c += 1  # the update's call
        d, m = (x & 15) + 2, 0
        while d < 40:
            m += d
            d += 2
        e = 0
        for k in range(x & 3):
            e += k + 1
        out[j] = c + n * 3 + d * 5 + m * 7 + e * 11
    return out


CASES["for_header_calls"] = (
    kernel(
        "  var c = 0u;\n  var n = 0u;\n"
        "  for (bump(&c, a[i] & 7u); c < (a[i] & 7u) + 5u; bump(&c, 1u)) {\n"
        "    n += c;\n    if (c == (a[i] & 7u) + 2u) { continue; }\n    n += 100u;\n  }\n"
        "  var d = a[i] & 15u;\n  var m = 0u;\n"
        "  for (_ = adv(&d); d < 40u; _ = adv(&d)) { m += d; }\n"
        "  var e = 0u;\n"
        "  for (var k = 0u; k < (a[i] & 3u); bump(&k, 1u)) { let c = k + 1u; e += c; }\n"
        "  out[i] = c + n * 3u + d * 5u + m * 7u + e * 11u;",
        "fn bump(p: ptr<function, u32>, by: u32) { *p += by; }\n"
        "fn adv(p: ptr<function, u32>) -> u32 { *p += 2u; return *p; }\n",
    ),
    _for_calls,
    (N // 64, 1, 1),
)


def _indices(a: np.ndarray) -> np.ndarray:
    out = np.zeros(N, np.int64)
    for z in range(2):
        for y in range(2):
            for x in range(2):
                w = x + y * 2 + z * 4  # WGSL's workgroup_index over 2 x 2 x 2 workgroups
                for local in range(16):
                    g = w * 16 + local  # the global_invocation_index, 16 a workgroup
                    out[g] = a[g] * 3 + w * 1000 + z * 7 + (local // 8) * 50 + 2 * 100000
    return out


# workgroup_index and global_invocation_index (as a member of the parameter struct), beside the
# workgroup_id and num_workgroups their lets read.
CASES["workgroup_and_global_invocation_index"] = (
    HEAD
    + "struct In { @builtin(global_invocation_index) g: u32, "
    + "@builtin(local_invocation_id) l: vec3<u32> }\n"
    + "@compute @workgroup_size(8, 2)\n"
    + "fn main(@builtin(workgroup_index) w: u32, inp: In, @builtin(workgroup_id) wid: vec3<u32>,"
    + " @builtin(num_workgroups) n: vec3<u32>) {\n"
    + "  out[inp.g] = a[inp.g] * 3u + w * 1000u + wid.z * 7u + inp.l.y * 50u + n.z * 100000u;\n}\n",
    _indices,
    (2, 2, 2),
)


# IO attributes on members of a struct of values (no stage's input or output here): dropped.
CASES["member_io_attributes"] = (
    kernel(
        "  let s = mk(a[i]);\n  out[i] = s.a + s.b.x * 3u + s.b.y + u32(s.c) * 7u;",
        "struct S {\n  @location(0) a: u32,\n  @location(1) @interpolate(flat) b: vec2<u32>,\n"
        "  @location(2) @interpolate(perspective, centroid) c: f32,\n}\n"
        "fn mk(x: u32) -> S { return S(x, vec2(x * 2u, 5u), f32(x & 255u)); }\n",
    ),
    lambda a: a * 7 + 5 + (a & 255) * 7,
    (N // 64, 1, 1),
)


# Storage buffers at a slot another takes that the entry point does not use: one declared
# before the buffer it shares a slot with, one after (both out of the kernel's interface).
CASES["binding_slot_shared_by_an_unused_buffer"] = (
    "@group(0) @binding(0) var<storage, read> before: array<f32>;\n"
    + HEAD
    + "@group(0) @binding(1) var<storage, read_write> after: array<vec4<u32>>;\n"
    + ENTRY
    + "  let i = gid.x;\n  out[i] = a[i] ^ 0x5a5au;\n}\n",
    lambda a: a ^ 0x5A5A,
    (N // 64, 1, 1),
)


# arrayLength of a let of a pointer (as &*r too).
CASES["array_length_through_a_pointer"] = (
    kernel(
        "  let q = &out;\n  let r = &a;\n  out[i] = a[i] + arrayLength(q) * 3u + arrayLength(&*r) * 5u;"
    ),
    lambda a: a + N * 3 + N * 5,
    (N // 64, 1, 1),
)

#: arrayLength of a helper's pointer parameter (read and read_write; passed on to another
#: helper; as &*p): naga (this wgpu) refuses a storage pointer parameter, so the interpreter's.
POINTER_PARAMETERS = kernel(
    "  out[i] = a[i] + outer(&a) * 3u + rw(&out) * 5u;",
    "fn count(p: ptr<storage, array<u32>, read>) -> u32 { return arrayLength(p); }\n"
    "fn outer(p: ptr<storage, array<u32>, read>) -> u32 { return count(p) + 1u; }\n"
    "fn rw(p: ptr<storage, array<u32>, read_write>) -> u32 { return arrayLength(&*p); }\n",
)


def test_array_length_of_a_pointer_parameter_on_the_interpreter_is_what_numpy_says():
    k = parse(POINTER_PARAMETERS, "pointer_parameters.wgsl")
    assert parse(emit(k), "pointer_parameters.wgsl") == k
    bufs = {"a": inputs(SEED), "out": np.full(N, POISON, np.uint32)}
    got = interp.run(k, bufs, {}, (N // 64, 1, 1))["out"]
    want = inputs(SEED).astype(np.int64) + (N + 1) * 3 + N * 5
    np.testing.assert_array_equal(got, want.astype(np.uint32))
    printed = emit(k)
    assert tint_check({"text": POINTER_PARAMETERS, "printed": printed}) == {
        "text": None,
        "printed": None,
    }


@pytest.mark.parametrize("backend", ["interp", "gpu"])
@pytest.mark.parametrize("name", CASES)
def test_form_prints_back_and_runs_as_numpy_says(name, backend, request):
    text, want, groups = CASES[name]
    assert_form_runs_as_numpy_says(text, name, want, backend, request, SEED, groups, wide=np.int64)


def test_tint_takes_the_forms_and_tint_and_naga_their_prints():
    assert_tint_takes_them_and_their_prints({n: t for n, (t, _, _) in CASES.items()})


def test_a_barrier_under_the_workgroup_index_is_refused_as_tint_refuses_it():
    # Tint holds the workgroup_index non-uniform, though its value is the workgroup's.
    text = (
        HEAD
        + "@compute @workgroup_size(64)\nfn main(@builtin(workgroup_index) w: u32) {\n"
        + "  if (w == 0u) { workgroupBarrier(); }\n  out[w] = a[w];\n}\n"
    )
    assert_refused(text, "barrier.wgsl", "depends on 'w' (workgroup_index")
    assert "must only be called from uniform control flow" in tint_check({"b": text})["b"]


def test_two_buffers_the_entry_point_uses_at_one_slot_are_refused_as_tint_refuses_them():
    text = kernel(
        "  out[i] = a[i];\n  helper();",
        "@group(0) @binding(1) var<storage, read_write> x: array<u32>;\n"
        "fn helper() { x[0] = 1u; }\n",
    )
    words = "references multiple variables that use the same resource binding '@group(0)', '@binding(1)'"
    assert_refused(text, "slots.wgsl", words)
    assert words in tint_check({"slots": text})["slots"]


def test_array_length_of_no_pointer_to_a_runtime_sized_array_is_refused_as_tint_refuses_it():
    texts = {
        "of_a_value": kernel(
            "  out[i] = g(a[i]);", "fn g(p: u32) -> u32 { return arrayLength(p); }\n"
        ),
        "of_a_fixed_size_array": kernel(
            "  var v = array<u32, 4>();\n  out[i] = g(&v);",
            "fn g(p: ptr<function, array<u32, 4>>) -> u32 { return arrayLength(p); }\n",
        ),
    }
    for name, text in texts.items():
        assert_refused(text, f"{name}.wgsl", "arrayLength takes a pointer to a runtime-sized")
    refusals = tint_check(texts)
    assert all("no matching call to 'arrayLength(" in refusals[n] for n in texts), refusals


SUBGROUP_IDS = (
    "enable subgroups;\n"
    + HEAD
    + "@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>, "
    + "@builtin(subgroup_id) s: u32, @builtin(num_subgroups) n: u32) {\n"
    + "  if (n > 0u) { workgroupBarrier(); }\n"
    + "  out[gid.x] = a[gid.x] + s * 1000u + n * 100000u;\n}\n"
)


def _subgroup_ids(size: int) -> np.ndarray:
    a, i = inputs(SEED).astype(np.int64), np.arange(N)
    return (a + (i % 64) // size * 1000 + -(-64 // size) * 100000).astype(np.uint32)


@pytest.mark.parametrize("size", [4, 16, 32])
def test_subgroup_id_and_num_subgroups_on_the_interpreter_are_what_numpy_says(size):
    k = parse(SUBGROUP_IDS, "subgroup_ids.wgsl")
    assert parse(emit(k), "subgroup_ids.wgsl") == k
    bufs = {"a": inputs(SEED), "out": np.full(N, POISON, np.uint32)}
    got = interp.run(k, bufs, {}, (N // 64, 1, 1), subgroup_size=size)["out"]
    np.testing.assert_array_equal(got, _subgroup_ids(size))


def test_subgroup_id_and_num_subgroups_on_the_gpu_are_what_numpy_says(gpu):
    size = runtime.subgroup_size()
    assert size is not None, "the suite's adapters have subgroups (tests/helpers/features.py)"
    k = parse(SUBGROUP_IDS, "subgroup_ids.wgsl")
    bufs = {"a": inputs(SEED), "out": np.full(N, POISON, np.uint32)}
    np.testing.assert_array_equal(
        runtime.run(k, bufs, {}, (N // 64, 1, 1))["out"], _subgroup_ids(size)
    )


def test_a_barrier_under_the_subgroup_id_is_refused_as_tint_refuses_it():
    text = SUBGROUP_IDS.replace("if (n > 0u)", "if (s > 0u)")
    assert tint_check({"takes": SUBGROUP_IDS})["takes"] is None
    assert_refused(text, "barrier.wgsl", "depends on 's' (subgroup_id")
    assert "must only be called from uniform control flow" in tint_check({"b": text})["b"]
