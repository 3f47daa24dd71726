"""The interpreter: planted defects are caught, control flow and locals mean what WGSL says,
and kernels agree with numpy and with the GPU (chunked, strided and batched execution:
``test_interp_execution.py``)."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import interp, runtime
from kvdsl.interp import OutOfBounds, RaceError, UninitializedRead
from kvdsl.ir import Dispatch, KernelBuilder, array, construct, f32, min_, select, u32, vec
from kvdsl.ir.builder import Local, binary
from kvdsl.ir.tree import Assign, Break, Continue, For, Lit, Var
from kvdsl.ir.ops import Op
from kvdsl.kernels.transpose import TransposeConfig, transpose
from tests.helpers.interp_inputs import nonzero, poison

D = 8  # head dim of the small row kernels


def row_copy(guard: bool = True, bound_op: Op = Op.LT, row_of=lambda i: i) -> object:
    """dst[row_of(i) * D + d] = src[i * D + d] for d in [0, D) (``bound_op`` LE plants an
    off-by-one), one invocation per row; ``guard`` False drops ``if (i >= rows) return``."""
    kb = KernelBuilder("row_copy", 4)
    hd = kb.const("HEAD_DIM", u32, D)
    src = kb.binding("src", f32)
    dst = kb.binding("dst", f32, "read_write")
    rows = kb.param("rows")
    i = kb.let("i", kb.gid.x)
    if guard:
        with kb.if_(i >= rows):
            kb.ret()
    r = kb.let("r", row_of(i))
    # for_range always writes "<": build the loop by hand to plant another bound.
    d = Local(kb, "d", u32)
    with kb._block() as blk:
        dst[r * hd + d] = src[i * hd + d]
    cond = binary(bound_op, d, hd)
    kb.emit(For(Var("d", u32, Lit(0, u32)), cond.node, Assign(d.node, (d + 1).node), tuple(blk)))
    return kb.build(Dispatch(rows.node, 4, 65535))


def test_row_copy_is_right():
    src = nonzero(6 * D)
    out = interp.run(row_copy(), {"src": src, "dst": poison(6 * D)}, {"rows": 6})
    np.testing.assert_array_equal(out["dst"], src)


def test_off_by_one_bound_is_caught():
    k = row_copy(bound_op=Op.LE)
    with pytest.raises(OutOfBounds) as e:
        interp.run(k, {"src": nonzero(6 * D), "dst": poison(6 * D)}, {"rows": 6})
    msg = str(e.value)
    # The last row reads one past the end: src[6 * D]; dst[6 * D] is the store it feeds.
    assert "src[48]" in msg and "length 48" in msg and "gid=(5, 0, 0)" in msg, msg
    assert "`dst[r * HEAD_DIM + d] = src[i * HEAD_DIM + d]`" in msg, msg


def test_missing_guard_is_caught():
    k = row_copy(guard=False)
    # 6 rows in workgroups of 4: invocations 6 and 7 have no row.
    with pytest.raises(OutOfBounds) as e:
        interp.run(k, {"src": nonzero(6 * D), "dst": poison(6 * D)}, {"rows": 6})
    assert "src[48]" in str(e.value) and "gid=(6, 0, 0)" in str(e.value), str(e.value)


def test_two_invocations_writing_one_row_is_a_race():
    k = row_copy(row_of=lambda i: i / 2)
    with pytest.raises(RaceError) as e:
        interp.run(k, {"src": nonzero(6 * D), "dst": poison(6 * D)}, {"rows": 6})
    msg = str(e.value)
    assert msg.startswith("dst[0]:") and "gid=(0, 0, 0)" in msg and "gid=(1, 0, 0)" in msg, msg


def test_uniform_index_store_by_many_is_a_race():
    kb = KernelBuilder("all_to_one", 8)
    out = kb.binding("out", u32, "read_write")
    out[3] = kb.gid.x
    k = kb.build()
    with pytest.raises(RaceError, match=r"out\[3\]"):
        interp.run(k, {"out": poison(4, np.uint32)}, None, (1, 1, 1))


def test_strict_init_and_read_after_foreign_write():
    kb = KernelBuilder("rmw", 4)
    buf = kb.binding("buf", u32, "read_write")
    i = kb.let("i", kb.gid.x)
    buf[i] = buf[i] + 1
    k = kb.build()
    data = np.arange(1, 9, dtype=np.uint32)
    assert interp.run(k, {"buf": data}, None, (2, 1, 1))["buf"].tolist() == list(range(2, 10))
    with pytest.raises(UninitializedRead, match=r"buf\[0\]"):
        interp.run(k, {"buf": data}, None, (2, 1, 1), strict_init=True)
    kb = KernelBuilder("neighbour", 4)
    buf = kb.binding("buf", u32, "read_write")
    i = kb.let("i", kb.gid.x)
    buf[i] = i
    with kb.if_(i > 0):
        buf[i - 1] = buf[i - 1] + 0  # reads what invocation i - 1 wrote
    with pytest.raises(RaceError, match=r"buf\[0\]"):
        interp.run(kb.build(), {"buf": data}, None, (2, 1, 1))


def _span(kb: KernelBuilder, total: str):
    """A workgroup's span of the rows: ``WG``, the bindings, and the span's first element and
    its end (``total`` names the element count)."""
    wg = kb.workgroup_const("WG")
    hd = kb.const("HEAD_DIM", u32, D)
    src = kb.binding("src", f32)
    dst = kb.binding("dst", f32, "read_write")
    count = kb.let(total, kb.param("rows") * hd)
    base = kb.let("elemBase", kb.wid.x * (wg * hd))
    return wg, src, dst, base, kb.let("wgEnd", min_(base + wg * hd, count))


def cooperative_walk():
    """The template's compact walk: lanes stride a workgroup's span with per-lane bounds."""
    kb = KernelBuilder("walk", 8)
    wg, src, dst, base, end = _span(kb, "total")
    e = kb.var("e", u32, base + kb.lid.x)
    with kb.for_range("s", 0, 1_000_000):  # a counted loop left only by break
        with kb.if_(e >= end):
            kb.emit(Break())
        dst[e] = src[e] * 2.0 + select(0.0, 1.0, (e % 3).eq(0))
        e.set(wg, Op.ADD)
    return kb.build(Dispatch((kb.param("rows") + 0).node, 8, 65535))


def cooperative_for():
    """``for (var e = elemBase + lid.x; e < wgEnd; e = e + WG)``: bounds differ per lane."""
    kb = KernelBuilder("walk_for", 8)
    wg, src, dst, base, end = _span(kb, "totalElems")
    e = Local(kb, "e", u32)
    with kb._block() as blk:
        dst[e] = src[e] * 2.0 + select(0.0, 1.0, (e % 3).eq(0))
    init = Var("e", u32, (base + kb.lid.x).node)
    kb.emit(For(init, (e < end).node, Assign(e.node, (e + wg).node), tuple(blk)))
    return kb.build(Dispatch(kb.param("rows").node, 8, 65535))


def break_continue():
    """acc = sum of src[i*D + d] for d < D, skipping d % 3 == 1, stopping after d == i % D."""
    kb = KernelBuilder("brk", 4)
    src = kb.binding("src", f32)
    dst = kb.binding("dst", f32, "read_write")
    rows = kb.param("rows")
    i = kb.let("i", kb.gid.x)
    with kb.if_(i >= rows):
        kb.ret()
    acc = kb.var("acc", f32, 0.0)
    with kb.for_range("d", 0, D) as d:
        with kb.if_((d % 3).eq(1)):
            kb.emit(Continue())
        acc.set(src[i * D + d], Op.ADD)
        with kb.if_(d.eq(i % D)):
            kb.emit(Break())
    dst[i] = acc
    return kb.build(Dispatch(rows.node, 4, 65535))


def var_arrays_and_helpers():
    """Rotate pairs of a var array in place (the aliasing hazard of ``let x0 = k[d]``), pick an
    element by a per-invocation index, and scale through a helper with an early return."""
    kb = KernelBuilder("locals", 4)
    src = kb.binding("src", f32)
    dst = kb.binding("dst", f32, "read_write")
    rows = kb.param("rows")
    with kb.function("scale", [("x", f32), ("j", u32)], f32) as (x, j):
        with kb.if_(j.eq(0)):
            kb.return_(x * 10.0)
        kb.return_(x + 1.0)
    i = kb.let("i", kb.gid.x)
    with kb.if_(i >= rows):
        kb.ret()
    k = kb.var("k", array(f32, D))
    with kb.for_range("d", 0, D) as d:
        k[d] = src[i * D + d]
    with kb.for_range("d", 0, D // 2) as d:
        x0 = kb.let("x0", k[d])
        x1 = kb.let("x1", k[d + D // 2])
        k[d] = x0 - x1
        k[d + D // 2] = x1 + x0 * 2.0
    with kb.for_range("d", 0, D) as d:
        dst[i * (D + 1) + d] = kb.fn_call("scale", k[d], i % 2)
    dst[i * (D + 1) + D] = k[i % D]
    return kb.build(Dispatch(rows.node, 4, 65535))


def vectors():
    kb = KernelBuilder("vectors", 4)
    src = kb.binding("src", vec(4, f32))
    dst = kb.binding("dst", vec(4, f32), "read_write")
    i = kb.let("i", kb.gid.x)
    with kb.if_(i >= kb.param("rows")):
        kb.ret()
    v = kb.var("v", vec(4, f32), src[i])
    v2 = v.member("wzyx") * 2.0 + construct(vec(4, f32), v.member("xy"), 1.0, i.to(f32))
    w = kb.var("w", vec(4, f32), v2)
    with kb.if_((i % 2).eq(1)):
        w.set(select(v2, v, v2.member("x") > v.member("y")))
    dst[i] = w - construct(vec(4, f32), v.member("z"), 0.5, 0.25, v[i % 4])
    return kb.build(Dispatch(kb.param("rows").node, 4, 65535))


def expected(name: str, src: np.ndarray, rows: int) -> np.ndarray:
    if name in ("walk", "walk_for"):
        e = np.arange(rows * D)
        return src * np.float32(2) + (e % 3 == 0).astype(np.float32)
    if name == "brk":
        out = np.zeros(rows, np.float32)
        for i in range(rows):
            for d in range(D):
                if d % 3 == 1:
                    continue
                out[i] += src[i * D + d]
                if d == i % D:
                    break
        return out
    if name == "locals":
        out = np.zeros((rows, D + 1), np.float32)
        for i in range(rows):
            k = src[i * D : (i + 1) * D].copy()
            h = D // 2
            k[:h], k[h:] = k[:h] - k[h:], k[h:] + k[:h] * np.float32(2)
            out[i, :D] = k * np.float32(10) if i % 2 == 0 else k + np.float32(1)
            out[i, D] = k[i % D]
        return out.reshape(-1)
    v = src.reshape(rows, 4)
    i = np.arange(rows, dtype=np.float32)
    v2 = v[:, ::-1] * np.float32(2) + np.stack([v[:, 0], v[:, 1], np.ones(rows, np.float32), i], 1)
    w = np.where(((np.arange(rows) % 2 == 1) & (v2[:, 0] > v[:, 1]))[:, None], v, v2)
    last = v[np.arange(rows), np.arange(rows) % 4]
    sub = np.stack(
        [v[:, 2], np.full(rows, 0.5, np.float32), np.full(rows, 0.25, np.float32), last], 1
    )
    return (w - sub).reshape(-1)


KERNELS = {
    "walk": (cooperative_walk, lambda r: r * D, lambda r: r * D),
    "walk_for": (cooperative_for, lambda r: r * D, lambda r: r * D),
    "brk": (break_continue, lambda r: r * D, lambda r: r),
    "locals": (var_arrays_and_helpers, lambda r: r * D, lambda r: r * (D + 1)),
    "vectors": (vectors, lambda r: r * 4, lambda r: r * 4),
}


@pytest.mark.parametrize("name", list(KERNELS))
@pytest.mark.parametrize("rows", [1, 13])
def test_control_flow_and_locals(name, rows):
    make, n_in, n_out = KERNELS[name]
    src = nonzero(n_in(rows))
    out = interp.run(make(), {"src": src, "dst": poison(n_out(rows))}, {"rows": rows})
    np.testing.assert_allclose(out["dst"], expected(name, src, rows), rtol=1e-6)


@pytest.mark.parametrize("name", list(KERNELS))
def test_gpu_agrees(gpu, name):
    make, n_in, n_out = KERNELS[name]
    k, rows = make(), 13
    bufs = {"src": nonzero(n_in(rows)), "dst": poison(n_out(rows))}
    a = interp.run(k, bufs, {"rows": rows})["dst"]
    b = runtime.run(k, bufs, {"rows": rows})["dst"]
    np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


def test_var_array_out_of_bounds_names_the_var():
    kb = KernelBuilder("varoob", 4)
    dst = kb.binding("dst", f32, "read_write")
    i = kb.let("i", kb.gid.x)
    k = kb.var("k", array(f32, 4))
    k[i] = 1.0
    dst[i] = k[i]
    with pytest.raises(OutOfBounds, match=r"k\[4\] is out of bounds \(length 4\).*gid=\(4, 0, 0\)"):
        interp.run(kb.build(), {"dst": poison(8)}, None, (2, 1, 1))


def test_source_lines_in_message():
    k = row_copy(guard=False)
    store = k.body[-1].body[0]
    with pytest.raises(OutOfBounds, match=r"\(line 42\)"):
        interp.run(
            k,
            {"src": nonzero(6 * D), "dst": poison(6 * D)},
            {"rows": 6},
            source_lines={id(store): 42},
        )


@pytest.mark.parametrize("vec4", [False, True])
@pytest.mark.parametrize("fold", [65535, 3])
@pytest.mark.parametrize("types", [("f32", "f32"), ("f16", "f32"), ("f32", "f16")])
def test_transpose_matches_numpy(vec4, fold, types):
    cfg = TransposeConfig(4, 16, vec4, types[0], types[1], workgroup_size=32, fold=fold)
    b, s, h, d = 2, 37, 4, 16
    in_t = np.float16 if types[0] == "f16" else np.float32
    key, value = nonzero((b, s, h * d), in_t), nonzero((b, s, h * d), in_t)
    out_t = np.float16 if types[1] == "f16" else np.float32
    bufs = {"key": key, "value": value, "present_key": poison(b * h * s * d, out_t)}
    bufs["present_value"] = poison(b * h * s * d, out_t)
    out = interp.run(transpose(cfg), bufs, {"batchSize": b, "kvSeq": s})
    for name, src in (("present_key", key), ("present_value", value)):
        want = src.reshape(b, s, h, d).transpose(0, 2, 1, 3).reshape(-1).astype(out_t)
        np.testing.assert_array_equal(out[name], want)


def test_transpose_fold_uses_two_dimensions():
    cfg = TransposeConfig(2, 8, False, workgroup_size=16, fold=2)
    k = transpose(cfg)
    from kvdsl.ir import workgroups

    assert workgroups(k, {"batchSize": 1, "kvSeq": 9}) == (2, 5, 1)
    key = nonzero((1, 9, 16))
    bufs = {"key": key, "value": key * 2, "present_key": poison(144), "present_value": poison(144)}
    out = interp.run(k, bufs, {"batchSize": 1, "kvSeq": 9})
    want = key.reshape(1, 9, 2, 8).transpose(0, 2, 1, 3).reshape(-1)
    np.testing.assert_array_equal(out["present_key"], want)
    np.testing.assert_array_equal(out["present_value"], want * 2)
    # A fold that drops the y part of the index would race: two workgroups write the same rows.
    with pytest.raises(RaceError):
        interp.run(
            transpose(TransposeConfig(2, 8, False, workgroup_size=16, fold=1)),
            bufs,
            {"batchSize": 1, "kvSeq": 9},
            workgroups=(2, 5, 1),
        )


def test_read_only_inputs_untouched_and_outputs_copied():
    src, dst = nonzero(6 * D), poison(6 * D)
    out = interp.run(row_copy(), {"src": src, "dst": dst}, {"rows": 6})
    assert np.isnan(dst).all() and out["dst"] is not dst


@pytest.mark.parametrize("dead", ["head", "odd"])
def test_errors_name_the_right_invocation_after_dead_lanes_are_dropped(dead):
    """Lanes that returned are dropped (as a run or scattered); messages keep true gids."""
    kb = KernelBuilder("dead", 8)
    dst = kb.binding("dst", u32, "read_write")
    i = kb.let("i", kb.gid.x)
    with kb.if_(i < 5 if dead == "head" else (i % 2).eq(1)):
        kb.ret()
    dst[i - 4] = i
    k = kb.build()
    if dead == "head":
        out = interp.run(k, {"dst": poison(12, np.uint32)}, None, (2, 1, 1))
        assert out["dst"][1:12].tolist() == list(range(5, 16)) and out["dst"][0] == 0xDEADBEEF
        with pytest.raises(OutOfBounds, match=r"dst\[11\].*gid=\(15, 0, 0\)"):
            interp.run(k, {"dst": poison(11, np.uint32)}, None, (2, 1, 1))
    else:
        with pytest.raises(OutOfBounds, match=r"dst\[4294967292\].*gid=\(0, 0, 0\)"):
            interp.run(k, {"dst": poison(16, np.uint32)}, None, (2, 1, 1))
