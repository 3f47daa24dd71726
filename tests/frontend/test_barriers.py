"""``storageBarrier()``: every invocation of a workgroup waits, and storage memory one of them
wrote before it is visible after it to the others of its workgroup (not to other workgroups).
A kernel using it parses, prints back to the same IR, runs in the interpreter and on the GPU to
what numpy says; the interpreter's race checks let a workgroup read and overwrite across it
what its own invocations wrote, and still catch the same accesses without it or across
workgroups. A barrier outside uniform control flow is a conformance case
(``cases/barriers/``, run by ``test_wgsl_cases.py``)."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import interp, runtime
from kvdsl.frontend import parse
from tests.helpers.backends import backend_run
from tests.helpers.wgsl import assert_buffers, assert_tint_takes, printed_back

N = 256  # four workgroups of 64

STORAGE = """@group(0) @binding(0) var<storage, read> a: array<u32>;
@group(0) @binding(1) var<storage, read_write> t: array<u32>;
@group(0) @binding(2) var<storage, read_write> o: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(workgroup_id) wid: vec3<u32>) {
  t[gid.x] = a[gid.x] * 3u + 1u;
  storageBarrier();
  let partner = wid.x * 64u + (63u - lid.x);
  let v = t[partner];
  storageBarrier();
  t[partner] = v ^ lid.x;
  o[gid.x] = v;
}
"""


def _inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(34)
    return {
        "a": rng.integers(1, 1 << 20, N).astype(np.uint32),
        "t": np.full(N, 0xDEADBEEF, np.uint32),
        "o": np.full(N, 0xDEADBEEF, np.uint32),
    }


def numpy_storage(bufs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """What STORAGE leaves: each invocation reads its mirror in its workgroup, then writes it."""
    t = bufs["a"].astype(np.int64) * 3 + 1
    lid = np.arange(N, dtype=np.int64) % 64
    partner = np.arange(N) // 64 * 64 + (63 - lid)
    v = t[partner]
    t2 = np.empty(N, np.int64)
    t2[partner] = v ^ lid
    return {"t": t2.astype(np.uint32), "o": v.astype(np.uint32)}


def test_storage_barrier_prints_back_to_the_same_ir():
    assert "storageBarrier();" in printed_back(STORAGE)


@pytest.mark.parametrize("backend", ["interp", "gpu"])
def test_storage_barrier_is_what_numpy_says(backend, request):
    bufs = _inputs()
    run = backend_run(backend, request)
    assert_buffers(run(parse(STORAGE), bufs, {}, (N // 64, 1, 1)), numpy_storage(bufs))


def test_without_the_barrier_or_across_workgroups_the_accesses_race():
    bufs = _inputs()
    first, second = STORAGE.split("storageBarrier();\n", 1)
    with pytest.raises(interp.RaceError, match=r"t\[63\].*reads it"):
        interp.run(parse(first + second), bufs, {}, (N // 64, 1, 1))
    # Overwriting what another invocation wrote, with no barrier between.
    over = first + "t[(gid.x + 1u) % 256u] = 5u;\n  storageBarrier();\n" + second
    with pytest.raises(interp.RaceError, match=r"t\[1\].*writes it"):
        interp.run(parse(over), bufs, {}, (N // 64, 1, 1))
    # Another workgroup's element: the barrier orders nothing between workgroups.
    across = STORAGE.replace("let partner = wid.x * 64u +", "let partner = (wid.x ^ 1u) * 64u +")
    with pytest.raises(interp.RaceError, match=r"workgroup"):
        interp.run(parse(across), bufs, {}, (N // 64, 1, 1))
    # A workgroupBarrier() orders workgroup memory only.
    wg = STORAGE.replace("storageBarrier()", "workgroupBarrier()")
    with pytest.raises(interp.RaceError):
        interp.run(parse(wg), bufs, {}, (N // 64, 1, 1))


# ``workgroupUniformLoad``: a loop bound every invocation reads from workgroup memory, the same
# in the workgroup, so a barrier may stand in the loop; the load's own barriers let invocations
# overwrite what it read with no barrier of their own.
UNIFORM_LOAD = """@group(0) @binding(0) var<storage, read> a: array<u32>;
@group(0) @binding(1) var<storage, read_write> o: array<u32>;
var<workgroup> w: array<u32, 64>;

fn bound(p: ptr<workgroup, u32>) -> u32 {
  return workgroupUniformLoad(p) % 8u;
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  w[lid.x] = a[gid.x];
  let n = workgroupUniformLoad(&w[3]) % 8u + 1u;
  let q = &w[5];
  let m = workgroupUniformLoad(q);
  let b = bound(&w[7]);
  var acc = 0u;
  for (var i = 0u; i < n; i++) {
    w[lid.x] = acc + lid.x;
    workgroupBarrier();
    acc += w[(lid.x + i) % 64u];
    workgroupBarrier();
  }
  o[gid.x] = acc * 1000u + m % 1000u + b * 7u;
}
"""


def numpy_uniform_load(a: np.ndarray) -> np.ndarray:
    """What UNIFORM_LOAD leaves in ``o``."""
    out = np.empty(N, np.int64)
    lid = np.arange(64)
    for g in range(N // 64):
        row = a[g * 64 : g * 64 + 64].astype(np.int64)
        n, m, b = row[3] % 8 + 1, row[5], row[7] % 8
        acc = np.zeros(64, np.int64)
        for i in range(n):
            w = acc + lid
            acc = acc + w[(lid + i) % 64]
        out[g * 64 : g * 64 + 64] = acc * 1000 + m % 1000 + b * 7
    return (out % 2**32).astype(np.uint32)


def _uniform_inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(35)
    return {
        "a": rng.integers(1, 1 << 24, N).astype(np.uint32),
        "o": np.full(N, 0xDEADBEEF, np.uint32),
    }


def test_workgroup_uniform_load_prints_back_to_the_same_ir():
    assert printed_back(UNIFORM_LOAD).count("workgroupUniformLoad(") == 3


def test_workgroup_uniform_load_in_the_interpreter_is_what_numpy_says():
    bufs = _uniform_inputs()
    got = interp.run(parse(UNIFORM_LOAD), bufs, {}, (N // 64, 1, 1))
    want = numpy_uniform_load(bufs["a"])
    assert len(set((bufs["a"][3::64] % 8).tolist())) > 1  # the workgroups loop differently
    np.testing.assert_array_equal(got["o"], want)


# naga (wgpu 0.32) takes no workgroup pointer parameter (the helper): the GPU runs the load inline.
_HELPER = "fn bound(p: ptr<workgroup, u32>) -> u32 {\n  return workgroupUniformLoad(p) % 8u;\n}\n\n"
INLINE = UNIFORM_LOAD.replace(_HELPER, "").replace(
    "bound(&w[7])", "workgroupUniformLoad(&w[7]) % 8u"
)


def test_workgroup_uniform_load_on_the_gpu_is_what_numpy_says(gpu):
    bufs = _uniform_inputs()
    k = parse(INLINE)
    np.testing.assert_array_equal(
        interp.run(k, bufs, {}, (N // 64, 1, 1))["o"], numpy_uniform_load(bufs["a"])
    )
    got = runtime.run(k, bufs, {}, (N // 64, 1, 1))
    np.testing.assert_array_equal(got["o"], numpy_uniform_load(bufs["a"]))


ORDER = """@group(0) @binding(0) var<storage, read> a: array<u32>;
@group(0) @binding(1) var<storage, read_write> o: array<u32>;
var<workgroup> w: array<u32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  w[lid.x] = a[gid.x];
  let v = workgroupUniformLoad(&w[3]);
  w[lid.x] = v + lid.x;
  o[gid.x] = v;
}
"""


def test_the_loads_barriers_order_workgroup_memory():
    bufs = _uniform_inputs()
    # Invocation 3's store before the load and the stores after it: its barriers order them.
    got = interp.run(parse(ORDER), bufs, {}, (N // 64, 1, 1))
    np.testing.assert_array_equal(got["o"], np.repeat(bufs["a"][3::64], 64))
    # A plain read there races with invocation 3's store.
    plain = ORDER.replace("workgroupUniformLoad(&w[3])", "w[3]")
    with pytest.raises(interp.RaceError, match=r"w\[3\]"):
        interp.run(parse(plain), bufs, {}, (N // 64, 1, 1))


def test_tint_takes_the_kernels():
    assert_tint_takes({"storage": STORAGE, "uniform_load": UNIFORM_LOAD})
