"""The interpreter's findings on planted bugs: out-of-bounds reads and writes and races (two
invocations writing one element, or one reading what another wrote), in storage bindings and
in workgroup memory. Each finding fires on a small kernel with the bug planted, naming the
element and the invocation(s), and stays quiet on its corrected twin, whose outputs equal
numpy's on random non-zero inputs of both signs.

Index sets come in the shapes the interpreter checks by different paths: a strided one (every
lane active), a masked one (some lanes skip the access under an ``if``), a scattered one (a
permutation: gathers and scatters) and, for reads, a uniform one (one element for all).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from kvdsl import interp
from kvdsl.interp import OutOfBounds, RaceError
from kvdsl.ir import KernelBuilder, array, f32
from tests.helpers.interp_inputs import nonzero, poison

WG = 8  # invocations per workgroup
GROUPS = 3
N = WG * GROUPS  # invocations, and the length of every storage binding
DISPATCH = (GROUPS, 1, 1)
STEP = 5  # the scattered index: (i * 5) % N, a permutation of 0 .. N-1 (5 * 5 = 1 mod 24)

READ_FORMS = ["strided", "masked", "scattered", "uniform"]
WRITE_FORMS = ["strided", "masked", "scattered"]


def _j(kb, i, form: str):
    """The index an invocation works on, in the IR: ``i`` itself, a permutation of it, or one
    element for all (``N - 1``)."""
    if form == "scattered":
        return kb.let("j", (i * STEP) % N)
    if form == "uniform":
        return kb.let("j", i * 0 + (N - 1))
    return i


def _jn(form: str) -> np.ndarray:
    """:func:`_j` in numpy, per invocation."""
    i = np.arange(N)
    return {"scattered": i * STEP % N, "uniform": np.full(N, N - 1)}.get(form, i)


def _active(form: str, i: np.ndarray) -> np.ndarray:
    """The invocations that reach the access: the masked form skips multiples of 3."""
    return i % 3 != 0 if form == "masked" else np.ones(len(i), bool)


class _always:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def _src_dst(name: str):
    """A builder of ``WG`` invocations a workgroup with its f32 ``src`` (read) and ``dst``
    (read_write) bindings."""
    kb = KernelBuilder(name, WG)
    return kb, kb.binding("src", f32), kb.binding("dst", f32, "read_write")


def _guard(kb, cond, form: str):
    return kb.if_(cond) if form == "masked" else _always()


def _gid(g: int) -> str:
    return f"invocation gid=({g}, 0, 0)"


def _writers(message: str) -> tuple[int, list[int]]:
    """The element and the two invocations a race message names."""
    element = int(re.match(r"\w+\[(\d+)\]", message).group(1))
    gids = [int(x) for x in re.findall(r"gid=\((\d+), 0, 0\)", message)]
    assert len(gids) == 2 and gids[0] != gids[1], message
    return element, gids


# ---- out of bounds in storage --------------------------------------------------------------


def _out_of_bounds(build, form: str, name: str, length: int, reaching: np.ndarray):
    """``build``'s planted kernel on random ``src``, its finding asserted: ``name[length]`` out
    of bounds, found for the first invocation active in ``form`` of those ``reaching`` says
    reach it. Returns ``src`` and what the twin leaves in ``dst``."""
    src = nonzero(N)
    bufs = {"src": src, "dst": poison(N)}
    with pytest.raises(OutOfBounds) as e:
        interp.run(build(True, form), bufs, None, DISPATCH)
    first = _gid(_first(form, reaching))
    words = f"{name}[{length}] is out of bounds (length {length}) for {first}"
    assert str(e.value).startswith(words), str(e.value)
    return src, interp.run(build(False, form), bufs, None, DISPATCH)["dst"]


def _first(form: str, reaching: np.ndarray) -> int:
    """The first invocation active in ``form`` of those ``reaching`` says reach past the end."""
    return int(np.flatnonzero(_active(form, np.arange(N)) & reaching)[0])


def storage_read(planted: bool, form: str):
    """``dst[i] = src[j + 1] * 3 - src[j]``: past the end for the invocation whose ``j`` is
    ``N - 1`` when planted; the twin wraps (``(j + 1) % N``)."""
    kb, src, dst = _src_dst("storage_read")
    i = kb.let("i", kb.gid.x)
    j = _j(kb, i, form)
    nxt = j + 1 if planted else (j + 1) % N
    with _guard(kb, (i % 3).ne(0), form):
        dst[i] = src[nxt] * 3.0 - src[j]
    return kb.build()


@pytest.mark.parametrize("form", READ_FORMS)
def test_storage_read_out_of_bounds(form):
    j = _jn(form)
    src, out = _out_of_bounds(storage_read, form, "src", N, j == N - 1)
    want = poison(N)
    on = _active(form, np.arange(N))
    want[on] = (src[(j + 1) % N] * np.float32(3) - src[j])[on]
    np.testing.assert_array_equal(out, want)


def storage_write(planted: bool, form: str):
    """``dst[j + 1] = src[i] * -2``: past the end for the invocation whose ``j`` is ``N - 1``
    when planted; the twin wraps."""
    kb, src, dst = _src_dst("storage_write")
    i = kb.let("i", kb.gid.x)
    j = _j(kb, i, form)
    with _guard(kb, (i % 3).ne(0), form):
        dst[j + 1 if planted else (j + 1) % N] = src[i] * -2.0
    return kb.build()


@pytest.mark.parametrize("form", WRITE_FORMS)
def test_storage_write_out_of_bounds(form):
    src, out = _out_of_bounds(storage_write, form, "dst", N, _jn(form) == N - 1)
    want = poison(N)
    on = _active(form, np.arange(N))
    want[((_jn(form) + 1) % N)[on]] = (src * np.float32(-2))[on]
    np.testing.assert_array_equal(out, want)


# ---- races in storage ------------------------------------------------------------------------


def storage_race(planted: bool, form: str):
    """``dst[j / 2] = src[i] + 1``: invocations with ``j`` 2k and 2k + 1 both write element k
    when planted; the twin sends odd ``j`` to the upper half (``j / 2 + (j % 2) * N / 2``)."""
    kb, src, dst = _src_dst("storage_race")
    i = kb.let("i", kb.gid.x)
    j = _j(kb, i, form)
    with _guard(kb, (i % 3).ne(0), form):
        dst[j / 2 if planted else j / 2 + (j % 2) * (N // 2)] = src[i] + 1.0
    return kb.build()


@pytest.mark.parametrize("form", WRITE_FORMS)
def test_storage_race_two_writers(form):
    src = nonzero(N)
    bufs = {"src": src, "dst": poison(N)}
    i, j = np.arange(N), _jn(form)
    on = _active(form, i)
    with pytest.raises(RaceError) as e:
        interp.run(storage_race(True, form), bufs, None, DISPATCH)
    msg = str(e.value)
    element, gids = _writers(msg)
    assert msg.startswith(f"dst[{element}]: "), msg
    assert all(on[g] and j[g] // 2 == element for g in gids), msg  # both really write it

    out = interp.run(storage_race(False, form), bufs, None, DISPATCH)["dst"]
    want = poison(N)
    want[(j // 2 + j % 2 * (N // 2))[on]] = (src + np.float32(1))[on]
    np.testing.assert_array_equal(out, want)


def storage_two_stores(planted: bool, form: str):
    """``dst[j] = src[i]``, then a second statement stores ``src[i] * 2`` at ``(j + 1) % N``:
    into ``dst`` when planted (the element another invocation's first store wrote), into
    ``aux`` in the twin."""
    kb, src, dst = _src_dst("storage_two_stores")
    second = dst if planted else kb.binding("aux", f32, "read_write")
    i = kb.let("i", kb.gid.x)
    j = _j(kb, i, form)
    dst[j] = src[i]
    with _guard(kb, (i % 3).ne(0), form):
        second[(j + 1) % N] = src[i] * 2.0
    return kb.build()


@pytest.mark.parametrize("form", WRITE_FORMS)
def test_storage_race_two_writers_in_two_statements(form):
    src = nonzero(N)
    bufs = {"src": src, "dst": poison(N), "aux": poison(N)}
    i, j = np.arange(N), _jn(form)
    on = _active(form, i)
    with pytest.raises(RaceError) as e:
        interp.run(storage_two_stores(True, form), bufs, None, DISPATCH)
    msg = str(e.value)
    element, (first, second) = _writers(msg)
    assert msg.startswith(f"dst[{element}]: ") and " writes it in the same dispatch" in msg, msg
    assert j[first] == element and on[second] and (j[second] + 1) % N == element, msg

    out = interp.run(storage_two_stores(False, form), bufs, None, DISPATCH)
    want_dst, want_aux = poison(N), poison(N)
    want_dst[j] = src
    want_aux[((j + 1) % N)[on]] = (src * np.float32(2))[on]
    np.testing.assert_array_equal(out["dst"], want_dst)
    np.testing.assert_array_equal(out["aux"], want_aux)


def storage_read_written(planted: bool, form: str):
    """``dst[j] = src[i]`` and then ``aux[i] = dst[(j + 1) % N]``: another invocation wrote that
    element in this dispatch when planted; the twin reads ``src`` for it."""
    kb, src, dst = _src_dst("storage_read_written")
    aux = kb.binding("aux", f32, "read_write")
    i = kb.let("i", kb.gid.x)
    j = _j(kb, i, form)
    dst[j] = src[i]
    nxt = (j + 1) % N
    with _guard(kb, (i % 3).ne(0), form):
        aux[i] = (dst[nxt] if planted else src[nxt]) * 0.5
    return kb.build()


@pytest.mark.parametrize("form", WRITE_FORMS)
def test_storage_race_read_of_another_invocations_write(form):
    src = nonzero(N)
    bufs = {"src": src, "dst": poison(N), "aux": poison(N)}
    with pytest.raises(RaceError) as e:
        interp.run(storage_read_written(True, form), bufs, None, DISPATCH)
    msg = str(e.value)
    element, (writer, reader) = _writers(msg)
    i, j = np.arange(N), _jn(form)
    assert msg.startswith(f"dst[{element}]: ") and " reads it in the same dispatch" in msg, msg
    assert j[writer] == element and (j[reader] + 1) % N == element, msg

    out = interp.run(storage_read_written(False, form), bufs, None, DISPATCH)
    want_dst = poison(N)
    want_dst[j] = src
    want_aux = poison(N)
    on = _active(form, i)
    want_aux[on] = (src[(j + 1) % N] * np.float32(0.5))[on]
    np.testing.assert_array_equal(out["dst"], want_dst)
    np.testing.assert_array_equal(out["aux"], want_aux)


# ---- workgroup memory ------------------------------------------------------------------------


def shared_read(planted: bool, form: str):
    """Each invocation stores ``src[i]`` at ``w[lid]``; after a barrier it reads ``w[lid + 1]``,
    past the end for the last invocation of a workgroup when planted (the twin wraps)."""
    kb, src, dst = _src_dst("shared_read")
    w = kb.workgroup_var("w", array(f32, WG))
    i = kb.let("i", kb.gid.x)
    lid = kb.let("l", kb.lid.x)
    w[lid] = src[i]
    kb.barrier()
    k = lid * 0 + WG if form == "uniform" else lid + 1
    with _guard(kb, (i % 3).ne(0), form):
        dst[i] = w[k if planted else k % WG] - src[i]
    return kb.build()


@pytest.mark.parametrize("form", ["strided", "masked", "uniform"])
def test_workgroup_read_out_of_bounds(form):
    i = np.arange(N)
    k = np.full(N, WG) if form == "uniform" else i % WG + 1
    src, out = _out_of_bounds(shared_read, form, "w", WG, k == WG)
    want = poison(N)
    on = _active(form, i)
    want[on] = (src[i // WG * WG + k % WG] - src)[on]
    np.testing.assert_array_equal(out, want)


def shared_write(planted: bool, form: str):
    """Each invocation stores ``src[i]`` at ``w[lid + 1]``, past the end for the last of a
    workgroup when planted (the twin wraps); after a barrier ``dst[i] = w[lid] * 4``."""
    kb, src, dst = _src_dst("shared_write")
    w = kb.workgroup_var("w", array(f32, WG))
    i = kb.let("i", kb.gid.x)
    lid = kb.let("l", kb.lid.x)
    with _guard(kb, (i % 3).ne(0), form):
        w[lid + 1 if planted else (lid + 1) % WG] = src[i]
    kb.barrier()
    dst[i] = w[lid] * 4.0
    return kb.build()


@pytest.mark.parametrize("form", ["strided", "masked"])
def test_workgroup_write_out_of_bounds(form):
    i = np.arange(N)
    src, out = _out_of_bounds(shared_write, form, "w", WG, i % WG == WG - 1)

    # Workgroup memory starts zeroed: a slot whose writer skipped the store reads 0.
    writer = i // WG * WG + (i - 1) % WG
    want = np.where(_active(form, writer), src[writer] * np.float32(4), np.float32(0))
    np.testing.assert_array_equal(out, want)


def shared_race(planted: bool, form: str):
    """``w[lid / 2] = src[i]`` by every invocation (two per slot) when planted; in the twin only
    even ``lid`` store, the pair's sum. After a barrier ``dst[i] = w[lid / 2]``. The 'uniform'
    form stores one slot, ``w[0]``: by every invocation of a workgroup when planted, by the
    first of each workgroup in the twin (invocations of different workgroups never race on
    workgroup memory)."""
    kb, src, dst = _src_dst("shared_race")
    w = kb.workgroup_var("w", array(f32, WG))
    i = kb.let("i", kb.gid.x)
    lid = kb.let("l", kb.lid.x)
    slot = lid * 0 if form == "uniform" else lid / 2
    first = lid.eq(0) if form == "uniform" else (lid % 2).eq(0)
    if planted:
        with _guard(kb, (i % 3).ne(0), form):
            w[slot] = src[i]
    else:
        with kb.if_(first):
            w[slot] = src[i] + src[i + 1]
    kb.barrier()
    dst[i] = w[slot]
    return kb.build()


@pytest.mark.parametrize("form", ["strided", "masked", "uniform"])
def test_workgroup_race_two_writers(form):
    src = nonzero(N + 1)
    bufs = {"src": src, "dst": poison(N)}
    i = np.arange(N)
    slot = np.zeros(N, int) if form == "uniform" else i % WG // 2
    with pytest.raises(RaceError) as e:
        interp.run(shared_race(True, form), bufs, None, DISPATCH)
    msg = str(e.value)
    element, gids = _writers(msg)
    assert msg.startswith(f"w[{element}] (workgroup memory): "), msg
    assert " writes it with no workgroupBarrier() between" in msg, msg
    a, b = gids
    assert a // WG == b // WG and slot[a] == slot[b] == element, msg  # one workgroup, one slot
    assert _active(form, i)[a] and _active(form, i)[b], msg

    out = interp.run(shared_race(False, form), bufs, None, DISPATCH)["dst"]
    writer = i // WG * WG + (0 if form == "uniform" else i % WG // 2 * 2)
    np.testing.assert_array_equal(out, src[writer] + src[writer + 1])


def shared_no_barrier(planted: bool):
    """``w[lid] = src[i]``, then ``dst[i] = w[(lid + 1) % WG]``: a neighbour's slot read with no
    barrier between when planted; the twin has the barrier."""
    kb, src, dst = _src_dst("shared_no_barrier")
    w = kb.workgroup_var("w", array(f32, WG))
    i = kb.let("i", kb.gid.x)
    lid = kb.let("l", kb.lid.x)
    w[lid] = src[i] * -1.0
    if not planted:
        kb.barrier()
    dst[i] = w[(lid + 1) % WG]
    return kb.build()


def test_workgroup_race_read_without_barrier():
    src = nonzero(N)
    bufs = {"src": src, "dst": poison(N)}
    with pytest.raises(RaceError) as e:
        interp.run(shared_no_barrier(True), bufs, None, DISPATCH)
    msg = str(e.value)
    element, (writer, reader) = _writers(msg)
    assert msg.startswith(f"w[{element}] (workgroup memory): "), msg
    assert "reads it with no workgroupBarrier() between" in msg, msg
    assert writer % WG == element and (reader % WG + 1) % WG == element, msg
    assert writer // WG == reader // WG, msg

    out = interp.run(shared_no_barrier(False), bufs, None, DISPATCH)["dst"]
    i = np.arange(N)
    np.testing.assert_array_equal(out, -src[i // WG * WG + (i + 1) % WG])
