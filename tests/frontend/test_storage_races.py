"""Storage races in both directions: a write that another invocation's earlier read of the same
element is not ordered before is a race, as is a read or write after another invocation's write.
``storageBarrier()`` orders the accesses of one workgroup; across workgroups only a barrier and an
atomic on each side do (the last workgroup to arrive at a counter merges what the others wrote).
Each planted kernel is found by the interpreter, which names both invocations and both lines; its
corrected twin runs on the interpreter and on the GPU to what numpy says."""

from __future__ import annotations

import re

import numpy as np
import pytest

from kvdsl import interp, runtime
from kvdsl.frontend import parse_with_lines

N = 64  # one workgroup's columns
K = 4  # splits, one workgroup each

HEAD = """@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> partial: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
"""

ENTRY = """@compute @workgroup_size(64)
fn main(@builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
"""

# The first split merges the partials the other splits write in the same dispatch: its reads run
# before their writes in the interpreter's order, and nothing orders them on a GPU.
SPLIT_K_FIRST_MERGES = HEAD + ENTRY + """  let split = wid.x;
  if (split == 0u) {
    var s = x[lid.x] * 2.0;
    for (var k = 1u; k < nwg.x; k++) {
      s += partial[k * 64u + lid.x];
    }
    out[lid.x] = s;
  } else {
    partial[split * 64u + lid.x] = x[split * 64u + lid.x] * 2.0;
  }
}
"""

# The twin: the splits write their partials in one dispatch and a second kernel merges them.
SPLIT_K_PARTIALS = HEAD + ENTRY + """  partial[wid.x * 64u + lid.x] = x[wid.x * 64u + lid.x] * 2.0;
  out[wid.x * 64u + lid.x] = 0.0;
}
"""

SPLIT_K_MERGE = HEAD + ENTRY + """  var s = 0.0;
  for (var k = 0u; k < arrayLength(&partial) / 64u; k++) {
    s += partial[k * 64u + lid.x];
  }
  out[wid.x * 64u + lid.x] = s;
}
"""

# The last workgroup merges: every workgroup writes its partial, and the one that arrives last at
# the counter (its atomicAdd sees all the others') reads them all. Legal only with the barrier
# before each workgroup's atomic and the barrier after the last one's.
LAST_MERGES = (
    HEAD
    + """@group(0) @binding(3) var<storage, read_write> arrived: array<atomic<u32>>;
var<workgroup> last: array<u32, 1>;
"""
    + ENTRY
    + """  partial[wid.x * 64u + lid.x] = x[wid.x * 64u + lid.x] * 2.0;
  storageBarrier();
  if (lid.x == 0u) {
    last[0] = select(0u, 1u, atomicAdd(&arrived[0], 1u) == nwg.x - 1u);
  }
  if (workgroupUniformLoad(&last[0]) == 1u) {
    storageBarrier();
    var s = 0.0;
    for (var k = 0u; k < nwg.x; k++) {
      s += partial[k * 64u + lid.x];
    }
    out[lid.x] = s;
  }
}
"""
)

# The same without the counter: the highest workgroup assumes it runs last.
LAST_ASSUMED = LAST_MERGES.replace(
    "last[0] = select(0u, 1u, atomicAdd(&arrived[0], 1u) == nwg.x - 1u);",
    "last[0] = select(0u, 1u, wid.x == nwg.x - 1u);",
)
LAST_NO_RELEASE = LAST_MERGES.replace(
    "  storageBarrier();\n  if (lid.x == 0u)", "  if (lid.x == 0u)"
)
LAST_NO_ACQUIRE = LAST_MERGES.replace("    storageBarrier();\n    var s", "    var s")

# Within one workgroup: each invocation reads its neighbour's element, then overwrites its own.
ROTATE = """@group(0) @binding(0) var<storage, read_write> t: array<u32>;
@group(0) @binding(1) var<storage, read_write> o: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(workgroup_id) wid: vec3<u32>) {
  let v = t[wid.x * 64u + (lid.x + 1u) % 64u];
  storageBarrier();
  t[gid.x] = v * 3u;
  o[gid.x] = v;
}
"""
ROTATE_NO_BARRIER = ROTATE.replace("  storageBarrier();\n", "")
# Across the workgroup's edge the barrier orders nothing: each workgroup's last invocation reads
# the next workgroup's first element (the last workgroup's, the first's), which that one writes.
ROTATE_ACROSS = ROTATE.replace("wid.x * 64u + (lid.x + 1u) % 64u", "(gid.x + 1u) % 256u")


def _run(text: str, bufs: dict, workgroups: tuple[int, int, int], name: str = "k.wgsl"):
    kernel, lines = parse_with_lines(text, name)
    return interp.run(kernel, bufs, {}, workgroups, source_lines=lines)


def _line(text: str, fragment: str) -> int:
    """The line of ``text`` that holds ``fragment`` (once)."""
    found = [n for n, line in enumerate(text.splitlines(), 1) if fragment in line]
    assert len(found) == 1, (fragment, found)
    return found[0]


def _split_inputs(rng) -> dict[str, np.ndarray]:
    return {
        "x": rng.uniform(0.5, 2.0, K * N).astype(np.float32),
        "partial": np.full(K * N, np.nan, np.float32),
        "out": np.full(K * N, np.nan, np.float32),
        "arrived": np.zeros(1, np.uint32),
    }


def _race(msg: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """The workgroups and lines of the two accesses a storage race message names."""
    wg = [int(w) for w in re.findall(r"workgroup \((\d+), 0, 0\)", msg)]
    lines = [int(n) for n in re.findall(r"\(line (\d+)\)", msg)]
    assert len(wg) == 2 and len(lines) == 2, msg
    return (wg[0], lines[0]), (wg[1], lines[1])


def test_a_split_k_merge_reading_partials_written_in_the_same_dispatch_races():
    bufs = _split_inputs(np.random.default_rng(1))
    with pytest.raises(interp.RaceError) as e:
        _run(SPLIT_K_FIRST_MERGES, {k: bufs[k] for k in ("x", "partial", "out")}, (K, 1, 1))
    msg = str(e.value)
    assert msg.startswith("partial[64]: "), msg
    assert " read it in `" in msg and " writes it in the same dispatch" in msg, msg
    read, write = _race(msg)
    text = SPLIT_K_FIRST_MERGES
    assert read == (0, _line(text, "s += partial")), msg
    assert write == (1, _line(text, "partial[split * 64u")), msg


def _split_k_twin(run, bufs):
    first = run(SPLIT_K_PARTIALS, bufs)
    merged = run(SPLIT_K_MERGE, {"x": bufs["x"], "partial": first["partial"], "out": first["out"]})
    return merged["out"]


def _split_k_numpy(x: np.ndarray) -> np.ndarray:
    return (x.reshape(K, N).astype(np.float32) * np.float32(2)).sum(0, dtype=np.float32)


def test_the_split_k_merge_in_its_own_dispatch_is_what_numpy_says(gpu):
    bufs = _split_inputs(np.random.default_rng(2))
    bufs = {k: bufs[k] for k in ("x", "partial", "out")}
    want = np.tile(_split_k_numpy(bufs["x"]), K)

    def on_interp(text, b):
        return _run(text, b, (K, 1, 1))

    def on_gpu(text, b):
        return runtime.run(parse_with_lines(text, "k.wgsl")[0], b, {}, (K, 1, 1))

    for run in (on_interp, on_gpu):
        # Summed in the kernel's order: partial 0 first, then 1, 2, 3.
        got = _split_k_twin(run, bufs)
        acc = np.zeros(N, np.float32)
        for k in range(K):
            acc = acc + bufs["x"][k * N : (k + 1) * N] * np.float32(2)
        np.testing.assert_array_equal(got, np.tile(acc, K))
        np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize(
    "text, reader_line",
    [
        (LAST_ASSUMED, "s += partial"),
        (LAST_NO_RELEASE, "s += partial"),
        (LAST_NO_ACQUIRE, "s += partial"),
    ],
    ids=["no counter", "no barrier before the atomic", "no barrier after it"],
)
def test_the_last_workgroup_merging_without_what_orders_it_races(text, reader_line):
    bufs = _split_inputs(np.random.default_rng(3))
    with pytest.raises(interp.RaceError) as e:
        _run(text, bufs, (K, 1, 1))
    msg = str(e.value)
    assert msg.startswith("partial[0]: ") and " reads it in the same dispatch" in msg, msg
    write, read = _race(msg)
    assert write == (0, _line(text, "partial[wid.x * 64u + lid.x] =")), msg
    assert read == (K - 1, _line(text, reader_line)), msg


def test_the_last_workgroup_merging_after_the_counter_is_what_numpy_says(gpu):
    bufs = _split_inputs(np.random.default_rng(4))
    kernel = parse_with_lines(LAST_MERGES, "k.wgsl")[0]
    acc = np.zeros(N, np.float32)
    for k in range(K):
        acc = acc + bufs["x"][k * N : (k + 1) * N] * np.float32(2)
    for got in (
        _run(LAST_MERGES, bufs, (K, 1, 1)),
        runtime.run(kernel, bufs, {}, (K, 1, 1)),
    ):
        np.testing.assert_array_equal(got["out"][:N], acc)
        assert np.isnan(got["out"][N:]).all()  # only the last workgroup writes out
        np.testing.assert_array_equal(got["partial"], bufs["x"] * np.float32(2))
        assert got["arrived"][0] == K


def _rotate_inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    return {
        "t": rng.integers(1, 1 << 30, 4 * N).astype(np.uint32),
        "o": np.full(4 * N, 0xDEADBEEF, np.uint32),
    }


def test_overwriting_what_another_invocation_of_the_workgroup_read_needs_a_barrier():
    with pytest.raises(interp.RaceError) as e:
        _run(ROTATE_NO_BARRIER, _rotate_inputs(), (4, 1, 1))
    msg = str(e.value)
    assert msg.startswith("t[0]: invocation gid=(63, 0, 0) (workgroup (0, 0, 0), local (63, 0, 0))")
    assert "local (0, 0, 0)) writes it in the same dispatch" in msg, msg
    read, write = _race(msg)
    assert read == (0, _line(ROTATE_NO_BARRIER, "let v =")) and write == (
        0,
        _line(ROTATE_NO_BARRIER, "t[gid.x] ="),
    ), msg


def test_a_storage_barrier_orders_nothing_across_workgroups():
    with pytest.raises(interp.RaceError) as e:
        _run(ROTATE_ACROSS, _rotate_inputs(), (4, 1, 1))
    msg = str(e.value)
    assert msg.startswith("t[0]: invocation gid=(255, 0, 0)"), msg
    read, write = _race(msg)
    assert read == (3, _line(ROTATE, "let v =")) and write == (0, _line(ROTATE, "t[gid.x] =")), msg


def test_the_rotation_with_its_barrier_is_what_numpy_says(gpu):
    bufs = _rotate_inputs()
    t = bufs["t"].reshape(4, N)
    v = np.roll(t, -1, axis=1).reshape(-1)
    kernel = parse_with_lines(ROTATE, "k.wgsl")[0]
    for got in (_run(ROTATE, bufs, (4, 1, 1)), runtime.run(kernel, bufs, {}, (4, 1, 1))):
        np.testing.assert_array_equal(got["o"], v)
        np.testing.assert_array_equal(got["t"], v * np.uint32(3))
