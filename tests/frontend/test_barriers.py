"""``storageBarrier()``: every invocation of a workgroup waits, and storage memory one of them
wrote before it is visible after it to the others of its workgroup (not to other workgroups).
A kernel using it parses, prints back to the same IR, runs in the interpreter and on the GPU to
what numpy says; the interpreter's race checks let a workgroup read and overwrite across it
what its own invocations wrote, and still catch the same accesses without it or across
workgroups; a barrier outside uniform control flow is refused as Tint refuses it."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import interp, runtime
from kvdsl.emit import emit
from kvdsl.frontend import FrontendError, UnsupportedError, parse
from tests.helpers.wgsl import kernel

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
    k = parse(STORAGE)
    assert "storageBarrier();" in emit(k)
    assert parse(emit(k)) == k


def test_storage_barrier_in_the_interpreter_is_what_numpy_says():
    bufs = _inputs()
    got = interp.run(parse(STORAGE), bufs, {}, (N // 64, 1, 1))
    want = numpy_storage(bufs)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def test_storage_barrier_on_the_gpu_is_what_numpy_says(gpu):
    bufs = _inputs()
    got = runtime.run(parse(STORAGE), bufs, {}, (N // 64, 1, 1))
    want = numpy_storage(bufs)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


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


NONUNIFORM = kernel("  if (gid.x < 4u) { storageBarrier(); }")


def test_a_storage_barrier_outside_uniform_control_flow_is_refused():
    with pytest.raises(FrontendError) as info:
        parse(NONUNIFORM, "nonuniform.wgsl")
    assert not isinstance(info.value, UnsupportedError)
    assert "storageBarrier() must be reached in uniform control flow" in str(info.value)


def test_tint_refuses_a_storage_barrier_outside_uniform_control_flow():
    from kvdsl.runtime import tint_check

    checked = tint_check({"nonuniform": NONUNIFORM, "uniform": STORAGE})
    assert checked["uniform"] is None
    assert "storageBarrier" in checked["nonuniform"], checked["nonuniform"]
