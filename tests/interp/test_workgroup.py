"""Workgroup memory (``var<workgroup>``) and ``workgroupBarrier()`` through every layer: builder,
verifier, emitter, naga / Tint, the GPU, the interpreter and the WGSL frontend."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl.emit import emit
from kvdsl.ir import (
    Array,
    Barrier,
    Dispatch,
    KernelBuilder,
    VerifyError,
    WorkgroupVar,
    array,
    construct,
    f32,
    min_,
    u32,
    vec,
)
from kvdsl.ir.tree import Break, Continue, Let, Member, Return

WG = 64
ROW = 32


def row_sum(name: str = "row_sum"):
    """Each invocation stores its value in workgroup memory; after a barrier each invocation
    sums its row's ``ROW`` entries in order and writes the sum to its own output element."""
    kb = KernelBuilder(name, workgroup_size=WG)
    src = kb.binding("src", f32, "read")
    dst = kb.binding("dst", f32, "read_write")
    n = kb.param("count")
    w = kb.workgroup_var("rows", array(f32, WG))
    i = kb.let("i", kb.gid.x)
    v = kb.var("v", f32, 0.0)
    with kb.if_(i < n):
        v.set(src[i])
    w[kb.lid.x] = v
    kb.barrier()
    base = kb.let("base", kb.lid.x / ROW * ROW)
    s = kb.var("s", f32, 0.0)
    with kb.for_range("j", 0, ROW) as j:
        s.set(s + w[base + j])
    with kb.if_(i < n):
        dst[i] = s
    return kb.build(Dispatch(n.node, WG, 65535))


def expected_row_sums(x: np.ndarray) -> np.ndarray:
    """Row sums of ``x`` (padded with zeros to whole rows) in the kernel's order, in float32."""
    rows = -(-len(x) // ROW)
    padded = np.zeros(rows * ROW, np.float32)
    padded[: len(x)] = x
    acc = np.zeros(rows, np.float32)
    for j in range(ROW):
        acc = acc + padded.reshape(rows, ROW)[:, j]
    return np.repeat(acc, ROW)[: len(x)]


def random_inputs(rng: np.random.Generator, count: int) -> dict[str, np.ndarray]:
    x = rng.uniform(0.5, 2.0, count).astype(np.float32) * rng.choice([-1, 1], count)
    return {"src": x.astype(np.float32), "dst": np.full(count, np.nan, np.float32)}


def test_ir_nodes_and_emit() -> None:
    k = row_sum()
    assert k.workgroup_vars == (WorkgroupVar("rows", Array(f32, WG)),)
    assert Barrier() in k.body
    text = emit(k)
    lines = text.splitlines()
    decl = lines.index("var<workgroup> rows: array<f32, 64>;")
    assert lines[decl - 2].startswith("@group(0) @binding(2) var<uniform> params")
    assert lines[decl - 1] == "" and lines[decl + 1] == ""
    assert "  workgroupBarrier();" in lines
    assert "rows[lid.x] = v;" in text and "s = s + rows[base + j];" in text


def test_builder_rejects_whole_assignment() -> None:
    kb = KernelBuilder("k", workgroup_size=WG)
    w = kb.workgroup_var("w", array(f32, 4))
    with pytest.raises(VerifyError, match="one element at a time"):
        w.set(0.0)
    with pytest.raises(VerifyError, match="not a fixed-size array"):
        kb.workgroup_var("x", f32)


def _refused(body, match: str, **kw) -> None:
    """``body``'s kernel is refused by the verifier with a message ``match`` finds."""
    with pytest.raises(VerifyError, match=match):
        _kernel(body, **kw)


def _kernel(body, wvars=(("w", array(u32, WG)),), fn=False):
    """A kernel with one output whose body is written by ``body(kb, w, out)``."""
    kb = KernelBuilder("k", workgroup_size=WG)
    out = kb.binding("out", u32, "read_write")
    ws = [kb.workgroup_var(name, ty) for name, ty in wvars]
    if fn:
        with kb.function("helper", [("a", u32)], u32) as (a,):
            kb.barrier()
            kb.return_(a)
    body(kb, ws[0] if ws else None, out)
    return kb.build()


def _store_load(kb, w, out):
    w[kb.lid.x] = kb.gid.x
    out[kb.gid.x] = w[(kb.lid.x + 1) % WG]


def test_verify_barrier_rules() -> None:
    def in_if(kb, w, out):
        with kb.if_(kb.gid.x < 5):
            kb.barrier()
        _store_load(kb, w, out)

    _refused(
        in_if,
        r"must be reached in uniform control flow, but it depends on the condition of `if \(gid.x < 5u\)`, which depends on 'gid' \(global_invocation_id",
    )

    def after_return(kb, w, out):
        with kb.if_(kb.gid.x >= 100):
            kb.ret()
        w[kb.lid.x] = kb.gid.x
        kb.barrier()
        out[kb.gid.x] = w[(kb.lid.x + 1) % WG]

    _refused(
        after_return,
        r"on `if \(gid.x >= 100u\)`, which some invocations may leave by return, which depends on 'gid'",
    )

    # A helper may hold a barrier: the analysis asks its calls to
    # be uniform (tests/ir/test_uniformity.py); one never called is taken as WGSL takes it.
    assert Barrier() in _kernel(_store_load, fn=True).functions[0].body

    def bad_loop(kb, w, out):
        with kb.for_range("j", 0, kb.lid.x):
            kb.barrier()
        _store_load(kb, w, out)

    _refused(bad_loop, r"depends on the condition of `for \(.*lid.x.*`, which depends on 'lid'")

    def loop_with_break(kb, w, out):
        with kb.for_range("j", 0, 4):
            kb.barrier()
            with kb.if_(kb.gid.x.eq(3)):
                kb.emit(Return())
        _store_load(kb, w, out)

    _refused(
        loop_with_break,
        r"on the iterations of `for .*`, which depends on `if \(gid.x == 3u\)`, which some invocations may leave by return",
    )

    def good_loop(kb, w, out):
        with kb.for_range("j", 0, 4):
            kb.barrier()
            w[kb.lid.x] = kb.gid.x
        _store_load(kb, w, out)

    assert _kernel(good_loop).body[0].body[0] == Barrier()


def test_a_break_of_a_nested_loop_leaves_control_flow_uniform(gpu) -> None:
    # A break or continue belongs to its own loop: around a barrier in a uniform for (or if), a
    # loop nested inside that breaks on a loaded value is taken, as WGSL (and Tint) take it; one
    # that leaves the barrier's own loop is not (the workgroup exec fuzz draws the first form).
    def nested(kb, w, out):
        with kb.for_range("i", 0, 3):
            with kb.for_range("j", 0, 4):
                with kb.if_(out[kb.gid.x] > 5):
                    kb.emit(Break())
                with kb.if_(out[kb.gid.x].eq(2)):
                    kb.emit(Continue())
                out[kb.gid.x] = out[kb.gid.x] + 1
            w[kb.lid.x] = out[kb.gid.x]
            kb.barrier()
            out[kb.gid.x] = w[(kb.lid.x + 1) % WG]
            kb.barrier()

    from kvdsl.interp import run as interp_run
    from kvdsl.runtime import run as gpu_run

    k = _kernel(nested)
    buffers = {"out": np.arange(2 * WG, dtype=np.uint32) % 9}
    want = interp_run(k, dict(buffers), None, (2, 1, 1))["out"]
    assert not np.array_equal(want, buffers["out"])
    assert np.array_equal(gpu_run(k, dict(buffers), None, (2, 1, 1))["out"], want)

    def direct(kb, w, out):
        with kb.for_range("i", 0, 3):
            with kb.if_(out[kb.gid.x] > 5):
                kb.emit(Break())
            kb.barrier()
        _store_load(kb, w, out)

    _refused(direct, r"may leave by break, which depends on a load of 'out' \(read_write storage\)")


def test_verify_barrier_in_uniform_blocks_nested() -> None:
    """A barrier in a uniform if in a uniform for (or the reverse), a loop bounded by a let of
    uniform values (workgroup_id among them); not under a let of a load, a helper's result or
    an invocation's id."""

    def nested(cond, bound=lambda kb: 4):
        def body(kb, w, out):
            with kb.for_range("j", 0, bound(kb)):
                with kb.if_(cond(kb)):
                    w[kb.lid.x] = kb.gid.x
                    kb.barrier()
            _store_load(kb, w, out)

        return body

    k = _kernel(nested(lambda kb: kb.param("n") > 2))
    assert k.body[0].body[0].then[1] == Barrier()

    def uniform_let(kb):
        return kb.let("steps", min_(kb.wid.x * 3, kb.param("n")))

    assert "j < steps;" in emit(_kernel(nested(lambda kb: kb.param("n") > 2, uniform_let)))
    _refused(
        nested(lambda kb: kb.param("n") > 2, lambda kb: kb.let("steps", kb.lid.x)),
        r"the condition of `for .*steps.*`, which depends on 'steps', which depends on 'lid'",
    )
    _refused(
        nested(lambda kb: kb.lid.x > 0),
        r"the condition of `if \(lid.x > 0u\)`, which depends on 'lid'",
    )

    def shadowed(kb, w, out):
        # `a` is decided only when the if asks, after the loop's `x` shadows the one `a` read:
        # it must still be judged by the `x` it saw (an invocation's id), not the new one.
        x = kb.let("x", kb.lid.x)
        a = kb.let("a", x + 1)
        with kb.for_range("j", 0, 4):
            kb.let("x", kb.param("n"))
            with kb.if_(a > 2):
                kb.barrier()
        _store_load(kb, w, out)

    _refused(
        shadowed,
        r"`if \(a > 2u\)`, which depends on 'a', which depends on 'x', which depends on 'lid'",
    )

    def under_if(cond):
        def body(kb, w, out):
            with kb.if_(cond(kb, out)):
                kb.barrier()
            _store_load(kb, w, out)

        return body

    def twice(kb, out):
        with kb.function("twice", [("a", u32)], u32) as (a,):
            kb.return_(a * 2)
        return kb.fn_call("twice", kb.param("n")) > 2

    _refused(
        under_if(lambda kb, out: kb.let("n", out[0]) > 2),
        r"`if \(n > 2u\)`, which depends on 'n', which depends on a load of 'out'",
    )
    # A helper's result is as uniform as the arguments it depends on (WGSL's function tags):
    # twice(params.n) is, as Tint agrees; twice(lid.x) is not, nor a helper that loads.
    from kvdsl.runtime import tint_check

    text = emit(_kernel(under_if(twice)))
    assert tint_check({"k": text}) == {"k": None}

    def twice_lid(kb, out):
        with kb.function("twice", [("a", u32)], u32) as (a,):
            kb.return_(a * 2)
        return kb.fn_call("twice", kb.lid.x) > 2

    _refused(under_if(twice_lid), r"`if \(twice\(lid.x\) > 2u\)`, which depends on 'lid'")

    def loads(kb, out):
        with kb.function("first", [("a", u32)], u32) as (a,):
            kb.return_(out[a % 4])
        return kb.fn_call("first", kb.param("n")) > 2

    _refused(
        under_if(loads),
        r"on first\(\)'s result \(it depends on a load of 'out' \(read_write storage\)\)",
    )


def _store_load_barrier(kb, w, out):
    w[kb.lid.x] = kb.gid.x
    kb.barrier()
    out[kb.gid.x] = w[(kb.lid.x + 1) % WG]


def _param_return(kb, w, out):
    """Every invocation leaves when ``params.n`` is 0 (a uniform condition), before a barrier."""
    with kb.if_(kb.param("n").eq(0)):
        kb.ret()
    _store_load_barrier(kb, w, out)


def test_verify_barrier_after_a_uniform_return() -> None:
    """A return under an if on consts or params leaves every invocation or none: a barrier
    after it stays uniform (naga and Tint agree); a non-uniform or nested one does not."""
    from kvdsl.runtime import compile_wgsl, tint_check

    text = emit(_kernel(_param_return))
    compile_wgsl(text)
    assert tint_check({"k": text}) == {"k": None}

    def nested(kb, w, out):
        with kb.if_(kb.param("n").eq(0)):
            with kb.if_(kb.gid.x < 3):
                kb.ret()
        _store_load_barrier(kb, w, out)

    _refused(
        nested,
        r"`if \(params.n == 0u\)`, which some invocations may leave by return, which "
        r"depends on `if \(gid.x < 3u\)`, which some invocations may leave by return",
    )

    def mixed(kb, w, out):
        with kb.if_(kb.param("n").eq(0).lor(kb.lid.x < 3)):
            kb.ret()
        _store_load_barrier(kb, w, out)

    _refused(mixed, "may leave by return, which depends on 'lid'")


@pytest.mark.parametrize("n", [0, 3])
def test_uniform_return_runs(n: int, gpu) -> None:
    """n = 0: nothing written (the poison stays) on the interpreter and the GPU; else the
    barrier's exchange as usual."""
    from kvdsl.interp import run as interp_run
    from kvdsl.runtime import run as gpu_run

    k = _kernel(_param_return)
    out = np.full(WG * 2, 0xDEADBEEF, np.uint32)
    gid = np.arange(2 * WG, dtype=np.uint32)
    want = out if n == 0 else gid - gid % WG + (gid % WG + 1) % WG
    for run in (interp_run, gpu_run):
        got = run(k, {"out": out}, {"n": n}, workgroups=(2, 1, 1))["out"]
        assert got.tolist() == want.tolist(), run


def test_verify_workgroup_memory_limits() -> None:
    def fits(kb, w, out):
        _store_load(kb, w, out)

    _kernel(fits, wvars=(("w", array(u32, WG)), ("big", array(f32, 4096 - WG))))
    with pytest.raises(VerifyError, match="workgroup var 'big': .* 16400 bytes, more than 16384"):
        # vec3 elements take 16 bytes: 256 + 1009 * 16 = 16400
        _kernel(fits, wvars=(("w", array(u32, WG)), ("big", array(vec(3, f32), 1009))))

    def whole(kb, w, out):
        kb.emit(Let("copy", w.node))
        _store_load(kb, w, out)

    _refused(whole, "workgroup var 'w' used without an index")


def test_gpu_row_sum(gpu) -> None:
    from kvdsl.runtime import run

    rng = np.random.default_rng(7)
    k = row_sum()
    for count in (WG * 3, WG * 5 + ROW):  # the second ends in a half-full workgroup
        inputs = random_inputs(rng, count)
        got = run(k, inputs, {"count": count})["dst"]
        want = expected_row_sums(inputs["src"])
        assert got.view(np.uint32).tolist() == want.view(np.uint32).tolist()


def _two_vars(kb, w, out):
    """Two rounds each storing, reading the mirrored element and waiting."""
    with kb.for_range("j", 0, 2):
        w[kb.lid.x] = kb.gid.x + kb.lid.x
        kb.barrier()
        out[kb.gid.x] = w[WG - 1 - kb.lid.x]
        kb.barrier()


def test_naga_and_tint_accept() -> None:
    from kvdsl.runtime import compile_wgsl, tint_check

    texts = {"row_sum": emit(row_sum()), "loop": emit(_kernel(_two_vars))}
    for text in texts.values():
        compile_wgsl(text)
    assert tint_check(texts) == {name: None for name in texts}


# ---- interpreter ----------------------------------------------------------------------------


@pytest.mark.parametrize("count", [WG * 3, WG * 5 + ROW])
def test_interp_row_sum(count: int, monkeypatch) -> None:
    from kvdsl.interp import machine, run

    rng = np.random.default_rng(count)
    inputs = random_inputs(rng, count)
    want = expected_row_sums(inputs["src"]).view(np.uint32).tolist()
    got = run(row_sum(), inputs, {"count": count}, strict_init=True)["dst"]
    assert got.view(np.uint32).tolist() == want
    monkeypatch.setattr(machine, "CHUNK", 2 * WG)  # workgroup memory is per chunk
    got = run(row_sum(), inputs, {"count": count}, strict_init=True)["dst"]
    assert got.view(np.uint32).tolist() == want


def _interp_raises(error: type, body, match: str, **kw) -> None:
    """``body``'s kernel, run by the interpreter, raises ``error`` with a message ``match``
    finds."""
    with pytest.raises(error, match=match):
        _interp(body, **kw)


def _interp(body, groups: int = 2, strict: bool = False, wvars=(("w", array(u32, WG)),)):
    from kvdsl.interp import run

    k = _kernel(body, wvars=wvars)
    out = np.full(WG * groups, 0xDEADBEEF, np.uint32)
    return run(k, {"out": out}, workgroups=(groups, 1, 1), strict_init=strict)["out"]


def test_interp_races() -> None:
    from kvdsl.interp import RaceError

    def read_before_barrier(kb, w, out):
        _store_load(kb, w, out)

    _interp_raises(
        RaceError, read_before_barrier, r"w\[1\] \(workgroup memory\): invocation gid=\(1, 0, 0\)"
    )

    def same_element(kb, w, out):
        w[kb.lid.x / 2] = kb.gid.x
        kb.barrier()
        out[kb.gid.x] = w[kb.lid.x]

    _interp_raises(RaceError, same_element, r"w\[0\] .* wrote it and .* writes it")

    def write_after_read(kb, w, out):
        w[kb.lid.x] = kb.gid.x
        kb.barrier()
        x = kb.let("x", w[(kb.lid.x + 1) % WG])
        w[kb.lid.x] = x
        kb.barrier()
        out[kb.gid.x] = w[kb.lid.x]

    _interp_raises(
        RaceError, write_after_read, r"w\[0\] .* read it and .* local \(0, 0, 0\)\) writes it"
    )

    def separated(kb, w, out):
        w[kb.lid.x] = kb.gid.x
        kb.barrier()
        x = kb.let("x", w[(kb.lid.x + 1) % WG])
        kb.barrier()
        w[kb.lid.x] = x * 3
        kb.barrier()
        out[kb.gid.x] = w[(kb.lid.x + 5) % WG]

    got = _interp(separated)
    gid = np.arange(2 * WG, dtype=np.uint32)
    lid, base = gid % WG, gid - gid % WG
    assert got.tolist() == ((base + (lid + 6) % WG) * 3).astype(np.uint32).tolist()


def test_interp_out_of_bounds_and_uninitialised() -> None:
    from kvdsl.interp import OutOfBounds, UninitializedRead

    def oob(kb, w, out):
        w[kb.lid.x + 1] = kb.gid.x
        kb.barrier()
        out[kb.gid.x] = w[kb.lid.x]

    _interp_raises(OutOfBounds, oob, r"w\[64\] is out of bounds \(length 64\)")

    def half(kb, w, out):
        with kb.if_(kb.lid.x < WG // 2):
            w[kb.lid.x * 2] = kb.gid.x + 1
        kb.barrier()
        out[kb.gid.x] = w[kb.lid.x]

    _interp_raises(UninitializedRead, half, r"w\[1\] \(workgroup memory\) is read by", strict=True)
    got = _interp(half)  # zero-initialised, as WGSL's workgroup memory is
    gid = np.arange(2 * WG, dtype=np.uint32)
    lid = gid % WG
    want = np.where(lid % 2 == 0, gid - lid + lid // 2 + 1, 0)
    assert got.tolist() == want.tolist()


def test_interp_barrier_with_inactive_invocations() -> None:
    """The verifier rejects this shape; the interpreter still catches it when given the IR."""
    from dataclasses import replace

    from kvdsl.interp import InterpError, run
    from kvdsl.ir.tree import If

    def body(kb, w, out):
        _store_load(kb, w, out)

    k = _kernel(body)
    cond = (KernelBuilder("x").lid.x < 10).node
    k = replace(k, body=(If(cond, (Barrier(),)),) + k.body)
    out = np.full(WG * 2, 0xDEADBEEF, np.uint32)
    with pytest.raises(
        InterpError, match=r"reached by 10 of 64 invocations of workgroup \(0, 0, 0"
    ):
        run(k, {"out": out}, workgroups=(2, 1, 1))


# ---- lanes of vector elements ----------------------------------------------------------------


def quad_sum(name: str = "quad_sum"):
    """Each invocation stores its value as lane ``lid % 4`` of ``quads[lid / 4]``; after a barrier
    each invocation adds its row's ``ROW / 4`` quads as vectors and writes the lanes' sum,
    ``(a.x + a.y) + (a.z + a.w)``, to its output element."""
    kb = KernelBuilder(name, workgroup_size=WG)
    src = kb.binding("src", f32, "read")
    dst = kb.binding("dst", f32, "read_write")
    n = kb.param("count")
    w = kb.workgroup_var("quads", array(vec(4, f32), WG // 4))
    i = kb.let("i", kb.gid.x)
    v = kb.var("v", f32, 0.0)
    with kb.if_(i < n):
        v.set(src[i])
    w[kb.lid.x / 4, kb.lid.x % 4] = v
    kb.barrier()
    base = kb.let("base", kb.lid.x / ROW * (ROW // 4))
    acc = kb.var("acc", vec(4, f32), construct(vec(4, f32), 0.0, 0.0, 0.0, 0.0))
    with kb.for_range("j", 0, ROW // 4) as j:
        acc.set(acc + w[base + j])
    with kb.if_(i < n):
        dst[i] = (acc.x + acc.y) + (acc.z + acc.w)
    return kb.build(Dispatch(n.node, WG, 65535))


def expected_quad_sums(x: np.ndarray) -> np.ndarray:
    """:func:`quad_sum`'s row sums, in its order, in float32."""
    rows = -(-len(x) // ROW)
    padded = np.zeros(rows * ROW, np.float32)
    padded[: len(x)] = x
    lanes = np.zeros((rows, 4), np.float32)
    for j in range(ROW // 4):
        lanes = lanes + padded.reshape(rows, ROW // 4, 4)[:, j]
    sums = (lanes[:, 0] + lanes[:, 1]) + (lanes[:, 2] + lanes[:, 3])
    return np.repeat(sums, ROW)[: len(x)]


def test_lane_store_emits_and_round_trips() -> None:
    from dataclasses import replace

    from kvdsl.frontend import parse

    k = replace(quad_sum(), name="main")
    text = emit(k)
    assert "var<workgroup> quads: array<vec4<f32>, 16>;" in text
    assert "  quads[lid.x / 4u][lid.x % 4u] = v;" in text
    back = parse(text, dispatch=k.dispatch)
    assert back == k and emit(back) == text


@pytest.mark.parametrize("count", [WG * 3, WG * 5 + ROW])
def test_lane_store_gpu_and_interp(count: int, gpu) -> None:
    from kvdsl import interp
    from kvdsl.runtime import run

    rng = np.random.default_rng(count + 1)
    inputs = random_inputs(rng, count)
    want = expected_quad_sums(inputs["src"]).view(np.uint32).tolist()
    k = quad_sum()
    assert run(k, inputs, {"count": count})["dst"].view(np.uint32).tolist() == want
    got = interp.run(k, inputs, {"count": count}, strict_init=True)["dst"]
    assert got.view(np.uint32).tolist() == want


def test_lane_races_and_errors() -> None:
    from kvdsl.interp import OutOfBounds, RaceError, UninitializedRead

    quads = (("w", array(vec(4, u32), WG // 4)),)

    def lanes(kb, w, out):  # four invocations fill one element, no race between them
        w[kb.lid.x / 4, kb.lid.x % 4] = kb.gid.x
        kb.barrier()
        q = kb.let("q", w[kb.lid.x / 4])
        out[kb.gid.x] = q.x + q.y + q.z + q.w

    got = _interp(lanes, wvars=quads, strict=True)
    first = np.arange(2 * WG, dtype=np.uint32) // 4 * 4
    assert got.tolist() == (4 * first + 6).tolist()

    def same_lane(kb, w, out):
        w[kb.lid.x / 4, kb.lid.x % 2] = kb.gid.x
        kb.barrier()
        out[kb.gid.x] = w[kb.lid.x / 4].x

    _interp_raises(
        RaceError, same_lane, r"w\[0\]\[0\] \(workgroup memory\): .* wrote it and", wvars=quads
    )

    def whole_read(kb, w, out):  # reads the lanes the other three invocations wrote
        w[kb.lid.x / 4, kb.lid.x % 4] = kb.gid.x
        q = kb.let("q", w[kb.lid.x / 4])
        out[kb.gid.x] = q.x

    _interp_raises(
        RaceError,
        whole_read,
        r"w\[0\]\[1\] .* gid=\(1, 0, 0\) .* wrote it and .* gid=\(0, 0, 0\) .* reads",
        wvars=quads,
    )

    def own_lane(kb, w, out):  # reading back only its own lane is no race
        w[kb.lid.x / 4, kb.lid.x % 4] = kb.gid.x + 1
        out[kb.gid.x] = w[kb.lid.x / 4, kb.lid.x % 4] * 2

    assert _interp(own_lane, wvars=quads).tolist() == list(range(2, 4 * WG + 2, 2))

    def unwritten(kb, w, out):
        with kb.if_((kb.lid.x % 4).ne(3)):
            w[kb.lid.x / 4, kb.lid.x % 4] = kb.gid.x
        kb.barrier()
        out[kb.gid.x] = w[kb.lid.x / 4].x

    _interp_raises(
        UninitializedRead,
        unwritten,
        r"w\[0\]\[3\] \(workgroup memory\) is read by",
        wvars=quads,
        strict=True,
    )

    def past_lane(kb, w, out):
        w[kb.lid.x / 4, kb.lid.x % 8] = kb.gid.x
        kb.barrier()
        out[kb.gid.x] = w[kb.lid.x / 4].x

    _interp_raises(OutOfBounds, past_lane, r"w\[\]\[4\] is out of bounds \(length 4\)", wvars=quads)


def test_lane_store_needs_vector_elements() -> None:
    from kvdsl.ir.tree import Assign, Index, Lit, Name

    def scalar_lanes(kb, w, out):
        w[kb.lid.x, 0] = kb.gid.x

    _refused(scalar_lanes, "a lane index needs vector elements, not u32")

    def raw(kb, w, out):  # the same through raw IR: the verifier rejects it
        kb.emit(Assign(Index(Index(Name("w"), Lit(0, u32)), Lit(0, u32)), Lit(1, u32)))
        _store_load(kb, w, out)

    _refused(raw, "cannot index|one element at a time")

    def swizzle(kb, w, out):
        kb.emit(Assign(Member(Index(Name("w"), Lit(0, u32)), "x"), Lit(1, u32)))
        out[kb.gid.x] = w[kb.lid.x].x

    _refused(
        swizzle, r"one element at a time \(or one lane", wvars=(("w", array(vec(4, u32), WG // 4)),)
    )


# ---- frontend -------------------------------------------------------------------------------


def test_round_trip() -> None:
    from dataclasses import replace

    from kvdsl.frontend import parse

    wvars = (("w", array(u32, WG)), ("v4", array(vec(4, f32), 8)))
    for k in (row_sum("main"), _kernel(_two_vars, wvars=wvars)):
        k = replace(k, name="main")
        text = emit(k)
        back = parse(text, dispatch=k.dispatch)
        assert back == k and emit(back) == text
    assert back.workgroup_vars[1] == WorkgroupVar("v4", Array(vec(4, f32), 8))


def test_frontend_barrier_errors() -> None:
    from kvdsl.frontend import parse
    from kvdsl.frontend.errors import WgslTypeError

    head = (
        "@group(0) @binding(0) var<storage, read_write> out: array<u32>;\n"
        "var<workgroup> w: array<u32, 64>;\n"
        "@compute @workgroup_size(64)\n"
        "fn main(@builtin(local_invocation_id) lid: vec3<u32>) {\n"
    )
    ok = head + "  w[lid.x] = lid.x;\n  workgroupBarrier();\n  out[lid.x] = w[63u - lid.x];\n}\n"
    k = parse(ok)
    assert Barrier() in k.body and k.workgroup_vars == (WorkgroupVar("w", Array(u32, 64)),)
    bad = head + "  if (lid.x < 3u) {\n    workgroupBarrier();\n  }\n  out[lid.x] = w[lid.x];\n}\n"
    with pytest.raises(
        WgslTypeError,
        match=r"<wgsl>:6: workgroupBarrier\(\) must be reached in uniform control flow, but it depends on the condition of `if \(lid.x < 3u\)`",
    ):
        parse(bad)
    with pytest.raises(WgslTypeError, match="<wgsl>:5: workgroup var 'w' used without an index"):
        parse(head + "  w = array<u32, 64>();\n  out[0u] = w[0u];\n}\n")
