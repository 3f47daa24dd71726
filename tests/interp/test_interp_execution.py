"""The interpreter's execution strategies give what one invocation at a time would: chunks of
workgroups, strided (affine) index sets for loads, stores and race checks, and loops batched over
their trips (refused where a trip depends on another)."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import interp
from kvdsl.interp import RaceError, batch, indexsets, machine
from kvdsl.ir import Dispatch, KernelBuilder, f32, u32
from kvdsl.ir.tree import Break, For
from kvdsl.kernels.transpose import TransposeConfig, transpose
from tests.helpers.interp_inputs import nonzero, poison

# ---- chunks and strided access ---------------------------------------------------------------


def ids_kernel():
    """Each invocation of a (3, 2, 2) dispatch writes its gid, lid and wid components
    (x + 100*y + 10000*z) to its slots."""
    kb = KernelBuilder("ids", (4, 2, 1))
    out = kb.binding("out", u32, "read_write")
    flat = kb.let("flat", ((kb.wid.z * 2 + kb.wid.y) * 3 + kb.wid.x) * 8 + kb.lid.y * 4 + kb.lid.x)
    for k, b in enumerate((kb.gid, kb.lid, kb.wid)):
        out[flat * 3 + k] = b.x + b.y * 100 + b.z * 10000
    return kb.build()


def test_chunks_give_every_invocation_its_ids(monkeypatch):
    wg = (3, 2, 2)
    n = 3 * 2 * 2 * 8
    whole = interp.run(ids_kernel(), {"out": poison(3 * n, np.uint32)}, None, wg)["out"]
    # Every invocation, computed here: workgroups x fastest, then lid.x fastest inside.
    want = []
    for wz, wy, wx, ly, lx in np.ndindex(2, 2, 3, 2, 4):
        gx, gy, gz = wx * 4 + lx, wy * 2 + ly, wz
        want += [gx + gy * 100 + gz * 10000, lx + ly * 100, wx + wy * 100 + wz * 10000]
    np.testing.assert_array_equal(whole, want)
    for chunk in (8, 16, 24):  # one, two (splitting a row of three) and three workgroups
        monkeypatch.setattr(machine, "CHUNK", chunk)
        out = interp.run(ids_kernel(), {"out": poison(3 * n, np.uint32)}, None, wg)["out"]
        np.testing.assert_array_equal(out, want)


def test_race_across_chunks_is_caught(monkeypatch):
    monkeypatch.setattr(machine, "CHUNK", 8)
    kb = KernelBuilder("wrap", 8)
    dst = kb.binding("dst", u32, "read_write")
    dst[kb.gid.x % 12] = kb.gid.x
    k = kb.build()
    with pytest.raises(RaceError) as e:
        interp.run(k, {"dst": poison(12, np.uint32)}, None, (2, 1, 1))
    msg = str(e.value)
    assert msg.startswith("dst[0]:") and "gid=(0, 0, 0)" in msg and "gid=(12, 0, 0)" in msg, msg


def test_transpose_in_small_chunks_matches_numpy(monkeypatch):
    monkeypatch.setattr(machine, "CHUNK", 192)  # three workgroups: chunks split fold rows
    b, h, s, d = 2, 3, 20, 16
    key, value = nonzero((b, s, h * d)), nonzero((b, s, h * d))
    bufs = {"key": key, "value": value, "present_key": poison(b * h * s * d)}
    bufs["present_value"] = poison(b * h * s * d)
    out = interp.run(transpose(TransposeConfig(h, d, False)), bufs, {"batchSize": b, "kvSeq": s})
    for name, x in (("present_key", key), ("present_value", value)):
        want = x.reshape(b, s, h, d).transpose(0, 2, 1, 3).reshape(-1)
        np.testing.assert_array_equal(out[name], want)


@pytest.mark.parametrize(
    "index, shape",
    [
        (np.arange(5, 105, dtype=np.uint32), (5, ((100, 1),))),
        (np.arange(3, 300, 7, dtype=np.uint32), (3, ((43, 7),))),
        ((np.arange(6)[:, None] * 50 + np.arange(4) * 2 + 9).reshape(-1), (9, ((6, 50), (4, 2)))),
        (np.arange(10, dtype=np.int32)[::-1].copy(), None),  # falling
        ((np.arange(6)[:, None] * 5 + np.arange(4) * 2).reshape(-1), None),  # rows overlap
        (np.array([0, 1, 2, 4, 5, 6], np.uint32), (0, ((2, 4), (3, 1)))),
        (np.array([0, 1, 2, 4, 5, 7], np.uint32), None),  # last entry off
        (np.arange(0, 1000, dtype=np.uint32), None),  # past the end (length 999)
        # Trips of a batched loop as the outer level: rows interleave, the steps still nest.
        ((np.arange(3)[:, None] + np.arange(40) * 8).reshape(-1), (0, ((3, 1), (40, 8)))),
        (
            (np.arange(2)[:, None, None] * 4 + np.arange(5)[:, None] * 100 + np.arange(4))
            .reshape(-1)
            .astype(np.uint32),
            (0, ((2, 4), (5, 100), (4, 1))),
        ),
        ((np.arange(3)[:, None] + np.arange(40) * 2).reshape(-1), None),  # trips overlap
        (np.r_[np.arange(5000), np.arange(5000) + 6000].astype(np.uint32), None),  # past 999
        (np.r_[np.arange(500), np.arange(400) + 600], None),  # a second run of another length
    ],
)
def test_affine_index_sets(index, shape):
    assert indexsets.affine(index.astype(index.dtype), 999) == shape
    if shape is not None:
        data = np.arange(999, dtype=np.float32) + 0.5
        np.testing.assert_array_equal(indexsets.strided(data, shape).reshape(-1), data[index])


def test_strided_stores_and_loads_agree_with_gathers():
    """Strided, two-level and scattered index sets all land where the indices say, and
    overlapping rows of a strided store are still a race."""
    kb = KernelBuilder("shapes", 8)
    src = kb.binding("src", f32)
    a = kb.binding("a", f32, "read_write")
    bb = kb.binding("b", f32, "read_write")
    c = kb.binding("c", f32, "read_write")
    i = kb.let("i", kb.gid.x)
    a[i * 3 + 1] = src[i * 3 + 2]  # one progression
    bb[(i / 8) * 20 + (i % 8) * 2] = src[(i / 8) * 20 + i % 8]  # rows of a run
    c[(i * 7) % 64] = src[(i * 5) % 64]  # a permutation: gathers and scatters
    k = kb.build()
    s = nonzero(200)
    bufs = {"src": s, "a": poison(200), "b": poison(200), "c": poison(64)}
    out = interp.run(k, bufs, None, (8, 1, 1))
    i = np.arange(64)
    for name, dst_idx, src_idx in (
        ("a", i * 3 + 1, i * 3 + 2),
        ("b", i // 8 * 20 + i % 8 * 2, i // 8 * 20 + i % 8),
        ("c", i * 7 % 64, i * 5 % 64),
    ):
        want = poison(len(bufs[name]))
        want[dst_idx] = s[src_idx]
        np.testing.assert_array_equal(out[name], want, err_msg=name)

    kb = KernelBuilder("overlap", 8)
    dst = kb.binding("dst", u32, "read_write")
    i = kb.let("i", kb.gid.x)
    dst[(i / 4) * 3 + i % 4] = i  # rows of four, three apart: element 3 is written twice
    with pytest.raises(RaceError, match=r"dst\[3\]") as e:
        interp.run(kb.build(), {"dst": poison(64, np.uint32)}, None, (2, 1, 1))
    assert "gid=(3, 0, 0)" in str(e.value) and "gid=(4, 0, 0)" in str(e.value), str(e.value)


# ---- batched loops ---------------------------------------------------------------------------

LOOP_D = 12  # trips of the batched-loop kernels


def loop_kernel(form: str, start: int, step: int, guard: bool, twist: str | None):
    """A walk over ``s in [start, LOOP_D)`` by ``step``: ``form`` 'row' (one invocation per row,
    ``dst[i*D + s]``) or 'coop' (a workgroup's rows cooperatively, ``dst[base + s*WG + lid]``),
    optionally guarded by ``e < total``; after the loop, invocation ``i < rows`` stores
    ``aux[tail + i]``. ``twist`` adds what batching takes ('local_var': a var declared in the
    body; 'aux': a second binding stored, one statement each), must undo ('same_elem': every
    trip stores one element) or must refuse ('carried': a sum kept across trips, 'break',
    'lane_bound': a trip count per invocation, 'reads_written': reads the binding it stores)."""
    wg, d = 4, LOOP_D
    kb = KernelBuilder(f"loop_{form}", wg)
    src = kb.binding("src", f32)
    dst = kb.binding("dst", f32, "read_write")
    aux = kb.binding("aux", f32, "read_write")
    rows = kb.param("rows")
    tail = kb.param("tail")
    hd = kb.const("D", u32, d)
    total = kb.let("total", rows * hd)
    i = kb.let("i", kb.gid.x)
    acc = kb.var("acc", f32, 0.0) if twist == "carried" else None
    base = kb.let("base", kb.wid.x * (wg * d)) if form == "coop" else i * hd
    end = hd - i % 3 if twist == "lane_bound" else hd
    with kb.for_range("s", start, end, step) as s:
        e = kb.let("e", base + s * wg + kb.lid.x if form == "coop" else base + s)
        with kb.if_(e < total) if guard or form == "coop" else _nothing():
            x = src[e] * 2.0 + s.to(f32)
            if twist == "local_var":
                t = kb.var("t", f32, x)
                t.set(t * 3.0)
                x = t
            dst[e] = x
            if twist == "carried":
                acc.set(acc + src[e])
            elif twist == "break":
                with kb.if_(s.eq(7)):
                    kb.emit(Break())
            elif twist == "same_elem":
                aux[i] = src[e]
            elif twist == "reads_written":
                aux[e] = dst[e] + 1.0
            elif twist == "aux":
                aux[e] = x - src[e]
    with kb.if_(i < rows):
        aux[tail + i] = acc if twist == "carried" else src[i]
    return kb.build(Dispatch(rows.node, wg, 65535))


def loop_model(form, start, step, guard, twist, rows, src, n):
    """What :func:`loop_kernel` stores, one invocation and one trip at a time in numpy f32
    (``dst`` and ``aux``, outputs of ``n`` and ``n + 32`` elements, ``tail = n``)."""
    wg, d = 4, LOOP_D
    total = rows * d
    dst, aux = poison(n), poison(n + 32)
    f = np.float32
    for i in range(-(-rows // wg) * wg):
        lid, wid = i % wg, i // wg
        acc = f(0)
        end = d - i % 3 if twist == "lane_bound" else d
        for s in range(start, end, step):
            e = wid * wg * d + s * wg + lid if form == "coop" else i * d + s
            if (guard or form == "coop") and e >= total:
                continue
            x = f(src[e] * f(2) + f(s))
            if twist == "local_var":
                x = f(x * f(3))
            dst[e] = x
            if twist == "carried":
                acc = f(acc + src[e])
            elif twist == "break" and s == 7:
                break
            elif twist == "same_elem":
                aux[i] = src[e]
            elif twist == "reads_written":
                aux[e] = f(x + f(1))
            elif twist == "aux":
                aux[e] = f(x - src[e])
        if i < rows:
            aux[n + i] = acc if twist == "carried" else src[i]
    return dst, aux


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def spy_batches(monkeypatch) -> list[bool]:
    """A list that gets, per loop offered to the batched path, whether it ran batched (a batch
    that raised counts as run)."""
    ran: list[bool] = []
    real = machine.Machine.batched_loop

    def spy(self, *args):
        try:
            ok = real(self, *args)
        except Exception:
            ran.append(True)
            raise
        ran.append(ok)
        return ok

    monkeypatch.setattr(machine.Machine, "batched_loop", spy)
    return ran


def spy_machines(monkeypatch) -> list[tuple[bool, bool, bool]]:
    """A list that gets, per machine :func:`kvdsl.interp.run` starts, ``(batching, batched,
    fell_back)``: whether it may batch, whether a loop ran batched, whether a batch raised
    :class:`~kvdsl.interp.batch.Fallback` (the dispatch then runs again trip by trip)."""
    runs: list[tuple[bool, bool, bool]] = []
    real = machine.Machine.run

    def spy(self):
        fell_back = False
        try:
            real(self)
        except batch.Fallback:
            fell_back = True
            raise
        finally:
            runs.append((self.batching, self.batched, fell_back))

    monkeypatch.setattr(machine.Machine, "run", spy)
    return runs


def run_both(monkeypatch, k, bufs, params, workgroups=None):
    """The kernel's result batched and trip by trip, and whether any loop ran batched."""
    ran = spy_batches(monkeypatch)
    fast = interp.run(k, bufs, params, workgroups)
    batched = any(ran)
    monkeypatch.setattr(batch, "LANES", 1)  # no batch fits: every loop runs trip by trip
    slow = interp.run(k, bufs, params, workgroups)
    monkeypatch.undo()
    return fast, slow, batched


BATCHED = (None, "local_var", "aux")  # run batched from start to end
FALLS_BACK = ("same_elem",)  # start batched, then run again trip by trip
REFUSED = ("carried", "break", "reads_written", "lane_bound")  # never batched
TWISTS = BATCHED + FALLS_BACK + REFUSED


def loop_case(seed: int):
    rng = np.random.default_rng(seed)
    form = ("row", "coop")[seed % 2]
    twist = TWISTS[seed // 2 % len(TWISTS)]
    start, step = int(rng.integers(0, 3)), int(rng.integers(1, 4))
    rows = int(rng.integers(5, 23))
    guard = bool(rng.integers(0, 2))
    return form, twist, start, step, rows, guard


@pytest.mark.parametrize("seed", range(24))
def test_batched_loops_match_trip_by_trip_and_numpy(monkeypatch, seed):
    """Both paths run for real where batching is claimed (one batching machine that batched and
    did not fall back; then one that may not batch), the fallback and the refusals are the ones
    planned, and every result equals numpy's, one invocation and trip at a time."""
    form, twist, start, step, rows, guard = loop_case(seed)
    k = loop_kernel(form, start, step, guard, twist)
    # Rows rounded up to whole workgroups of rows for the cooperative walk's reads.
    n = (rows + 3) // 4 * 4 * LOOP_D
    bufs = {"src": nonzero(n), "dst": poison(n), "aux": poison(n + 32)}
    params = {"rows": rows, "tail": n}
    want = dict(
        zip(("dst", "aux"), loop_model(form, start, step, guard, twist, rows, bufs["src"], n))
    )
    runs = spy_machines(monkeypatch)
    fast = interp.run(k, bufs, params)
    if twist in BATCHED:
        assert runs == [(True, True, False)], (twist, runs)
    elif twist in FALLS_BACK:
        assert runs == [(True, True, True), (False, False, False)], (twist, runs)
    else:
        assert runs == [(True, False, False)], (twist, runs)
        loop = next(x for x in k.body if isinstance(x, For))
        refused_by_plan = batch.plan(loop, k, {}) is None
        assert refused_by_plan == (twist != "lane_bound"), twist  # lane_bound: by its values
    runs.clear()
    monkeypatch.setattr(batch, "LANES", 1)  # no batch fits: every loop runs trip by trip
    slow = interp.run(k, bufs, params)
    assert runs == [(True, False, False)], (twist, runs)
    for name in ("dst", "aux"):
        np.testing.assert_array_equal(fast[name], want[name], err_msg=f"{name} {twist} batched")
        np.testing.assert_array_equal(slow[name], want[name], err_msg=f"{name} {twist} trips")


def test_loop_seeds_cover_every_path():
    """Each of the batched, fallen-back and refused kernels comes in both forms, guarded and
    not (the batched ones), among the seeds above."""
    cases = [loop_case(seed) for seed in range(24)]
    for twist in TWISTS:
        assert {c[0] for c in cases if c[1] == twist} == {"row", "coop"}, twist
    assert {c[5] for c in cases if c[1] in BATCHED and c[0] == "row"} == {True, False}


def test_same_element_on_every_trip_keeps_the_last_trip(monkeypatch):
    k = loop_kernel("row", 0, 1, True, "same_elem")
    rows = 6
    bufs = {"src": nonzero(rows * LOOP_D), "dst": poison(rows * LOOP_D), "aux": poison(80)}
    params = {"rows": rows, "tail": rows * LOOP_D}
    fast, slow, batched = run_both(monkeypatch, k, bufs, params, (2, 1, 1))
    assert batched
    want = poison(80)
    want[:rows] = bufs["src"].reshape(rows, LOOP_D)[:, -1]
    want[rows * LOOP_D : rows * LOOP_D + rows] = bufs["src"][:rows]
    np.testing.assert_array_equal(fast["aux"], want)
    np.testing.assert_array_equal(slow["aux"], want)


def _error(k, bufs, params, workgroups=None) -> str:
    with pytest.raises(interp.InterpError) as e:
        interp.run(k, bufs, params, workgroups)
    return f"{type(e.value).__name__}: {e.value}"


def _batched_error(monkeypatch, k, bufs) -> str:
    """The error of ``k`` on two workgroups, run batched, having asserted that it is the error
    of running trip by trip."""
    ran = spy_batches(monkeypatch)
    fast = _error(k, bufs, None, (2, 1, 1))
    assert any(ran)
    monkeypatch.setattr(batch, "LANES", 1)
    assert _error(k, bufs, None, (2, 1, 1)) == fast
    return fast


def test_race_across_trips_is_caught_as_trip_by_trip(monkeypatch):
    """Invocation i writes dst[i + s]: trip 1 of invocation 0 writes what trip 0 of
    invocation 1 wrote, inside one batch."""
    kb = KernelBuilder("slide", 4)
    src = kb.binding("src", f32)
    dst = kb.binding("dst", f32, "read_write")
    i = kb.let("i", kb.gid.x)
    with kb.for_range("s", 0, 5) as s:
        dst[i + s] = src[i]
    k = kb.build()
    bufs = {"src": nonzero(8), "dst": poison(16)}
    fast = _batched_error(monkeypatch, k, bufs)
    assert fast.startswith("RaceError: dst[1]:"), fast
    assert "gid=(1, 0, 0)" in fast and "gid=(0, 0, 0)" in fast, fast


def test_strided_race_across_trips_is_caught():
    """Rows three apart but four long: trip 3 of row r and trip 0 of row r + 1 store one
    element, an index set that is strided per trip but not across trips."""
    kb = KernelBuilder("overlap_trips", 4)
    dst = kb.binding("dst", u32, "read_write")
    i = kb.let("i", kb.gid.x)
    with kb.for_range("s", 0, 4) as s:
        dst[i * 3 + s] = i
    with pytest.raises(RaceError, match=r"dst\[3\]") as e:
        interp.run(kb.build(), {"dst": poison(64, np.uint32)}, None, (2, 1, 1))
    assert "gid=(0, 0, 0)" in str(e.value) and "gid=(1, 0, 0)" in str(e.value), str(e.value)


def test_out_of_bounds_in_a_late_trip_names_its_invocation(monkeypatch):
    """Only the last invocation's last two trips read past the end: the message names it and
    the first index it reaches, as trip by trip does."""
    kb = KernelBuilder("late", 4)
    src = kb.binding("src", f32)
    dst = kb.binding("dst", f32, "read_write")
    i = kb.let("i", kb.gid.x)
    with kb.for_range("s", 0, 10) as s:
        dst[i * 10 + s] = src[i * 7 + s]
    k = kb.build()
    bufs = {"src": nonzero(57), "dst": poison(80)}  # invocation 7's trip 8 reads src[57]
    fast = _batched_error(monkeypatch, k, bufs)
    assert "src[57]" in fast and "gid=(7, 0, 0)" in fast and fast.startswith("OutOfBounds"), fast


def test_plan_refuses_what_cannot_batch():
    k = loop_kernel("row", 0, 1, False, None)
    loop = next(s for s in k.body if isinstance(s, For))
    funcs = {f.name: f for f in k.functions}
    assert batch.plan(loop, k, funcs) is not None
    for twist in ("carried", "break", "reads_written"):
        k = loop_kernel("row", 0, 1, False, twist)
        loop = next(s for s in k.body if isinstance(s, For))
        assert batch.plan(loop, k, funcs) is None, twist


SHADOWED = """@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  var v0 = gid.x;
  for (var i = 0u; i < 3u; i++) {
    {
      var v0 = 7u;
      v0 += i;
    }
    v0 = v0 * 2u + i;
  }
  out[gid.x] = v0;
}
"""


def test_a_var_shadowed_in_a_block_of_the_loop_is_still_the_outer_one_after_it(gpu):
    """The loop assigns the outer ``v0`` after a block that declares its own: not a loop-local
    var, so the loop is not batched (a batch plan that took the body's
    declarations as one set would batch the loop and lose the outer ``v0``'s value: the
    interpreter would give ``gid.x`` where the GPU gives ``8 * gid.x + 4``; the uniformity test's
    generated kernels shadow vars in blocks)."""
    from kvdsl.frontend import parse
    from kvdsl.runtime import run

    k = parse(SHADOWED)
    loop = next(s for s in k.body if isinstance(s, For))
    assert batch.plan(loop, k, {}) is None
    bufs = {"out": np.full(128, 0xDEADBEEF, np.uint32)}
    want = 8 * np.arange(128, dtype=np.uint32) + 4
    assert np.array_equal(interp.run(k, dict(bufs), None, (2, 1, 1))["out"], want)
    assert np.array_equal(run(k, dict(bufs), None, (2, 1, 1))["out"], want)
    # The same loop without the shadowing block assigns the outer var too: not batched either;
    # with only the block, the body touches nothing outside and batches.
    plain = SHADOWED.replace("    v0 = v0 * 2u + i;\n", "")
    k2 = parse(plain)
    assert batch.plan(next(s for s in k2.body if isinstance(s, For)), k2, {}) is not None
    assert np.array_equal(
        interp.run(k2, dict(bufs), None, (2, 1, 1))["out"], np.arange(128, dtype=np.uint32)
    )
