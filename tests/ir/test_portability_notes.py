"""Notes of `kvdsl check` found on an H100 (docs/deviations.md).

A read of storage the kernel writes after an atomic whose value it uses: the "last workgroup
merges" pattern of split-K kernels, which WGSL's memory model does not make portable (its atomics
are relaxed; storageBarrier orders a workgroup's own accesses), and which read NaN partials (the
corpus's `splitk_matvec_last_merges`). Reading storage before the atomic, an atomic whose value
is not used, and storage no invocation wrote are not noted.

A read of a bool array in workgroup memory, which NVIDIA's driver under wgpu-native read as
false where another invocation stored true; the same flags as u32 values are not noted."""

from __future__ import annotations

from kvdsl.frontend.parser import parse_with_lines
from kvdsl.ir.portability import BOOL_WORKGROUP, OTHER_WORKGROUPS_WRITES, hazards
from kvdsl.ir.portability import other_workgroups_writes
from tests.helpers.paths import ROOT

SPLITK = (ROOT / "tests/frontend/corpus/splitk_matvec_last_merges.wgsl").read_text()
ATOMIC = "last[0] = select(0u, 1u, atomicAdd(&arrived[wid.x], 1u) == splits - 1u);"
MERGE = "total += partial[s * params.rows + row];"


def _noted_lines(text: str) -> list[int]:
    kernel, lines = parse_with_lines(text, "splitk.wgsl")
    return [lines[id(s)] for s, why in hazards(kernel) if why == OTHER_WORKGROUPS_WRITES]


def test_the_last_workgroups_read_of_the_partials_is_noted():
    assert ATOMIC in SPLITK and MERGE in SPLITK
    at = next(i for i, line in enumerate(SPLITK.splitlines(), 1) if MERGE in line)
    assert _noted_lines(SPLITK) == [at]


def test_an_atomic_whose_value_is_unused_is_not_noted():
    counted = SPLITK.replace(ATOMIC, "atomicAdd(&arrived[wid.x], 1u);\n    last[0] = 1u;")
    assert _noted_lines(counted) == []


def test_a_read_before_the_atomic_is_not_noted():
    # The partial read back before the workgroup counts itself in: its own write.
    early = SPLITK.replace(
        "  // Release this", "  y[0] = partial[wid.y * params.rows];\n  // Release this"
    )
    kernel, _ = parse_with_lines(early, "early.wgsl")
    assert len(other_workgroups_writes(kernel)) == 1  # the merge's read, not the early one


def test_storage_nobody_wrote_is_not_noted():
    # The last workgroup reads the weights (read only) and x: no invocation writes them.
    reads_inputs = SPLITK.replace(MERGE, "total += w[s * params.rows + row] * x[s];")
    assert _noted_lines(reads_inputs) == []


FLAGS = """@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
var<workgroup> flags: array<FLAG, 64>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  flags[lid.x] = SET;
  workgroupBarrier();
  out[gid.x] = select(0.0, 0.5, READ);
}
"""


def test_a_read_of_a_bool_in_workgroup_memory_is_noted_and_of_a_u32_not():
    bools = FLAGS.replace("FLAG", "bool").replace("SET", "x[gid.x] > 0.0")
    bools = bools.replace("READ", "flags[(lid.x + 1u) % 64u]")
    kernel, lines = parse_with_lines(bools, "flags.wgsl")
    assert [(lines[id(s)], why) for s, why in hazards(kernel)] == [(8, BOOL_WORKGROUP)]
    words = FLAGS.replace("FLAG", "u32").replace("SET", "select(0u, 1u, x[gid.x] > 0.0)")
    words = words.replace("READ", "flags[(lid.x + 1u) % 64u] != 0u")
    assert hazards(parse_with_lines(words, "words.wgsl")[0]) == []
