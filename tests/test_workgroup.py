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
    f32,
    u32,
    vec,
)
from kvdsl.ir.nodes import Let, Return

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

    with pytest.raises(VerifyError, match="inside an if"):
        _kernel(in_if)

    def after_return(kb, w, out):
        with kb.if_(kb.gid.x >= 100):
            kb.ret()
        w[kb.lid.x] = kb.gid.x
        kb.barrier()
        out[kb.gid.x] = w[(kb.lid.x + 1) % WG]

    with pytest.raises(VerifyError, match=r"after `if \(gid.x >= 100u\)`, which returns"):
        _kernel(after_return)

    with pytest.raises(VerifyError, match="function helper: a helper function may not contain"):
        _kernel(_store_load, fn=True)

    def bad_loop(kb, w, out):
        with kb.for_range("j", 0, kb.lid.x):
            kb.barrier()
        _store_load(kb, w, out)

    with pytest.raises(VerifyError, match="header uses 'lid'"):
        _kernel(bad_loop)

    def loop_with_break(kb, w, out):
        with kb.for_range("j", 0, 4):
            kb.barrier()
            with kb.if_(kb.gid.x.eq(3)):
                kb.emit(Return())
        _store_load(kb, w, out)

    with pytest.raises(VerifyError, match="holding return"):
        _kernel(loop_with_break)

    def good_loop(kb, w, out):
        with kb.for_range("j", 0, 4):
            kb.barrier()
            w[kb.lid.x] = kb.gid.x
        _store_load(kb, w, out)

    assert _kernel(good_loop).body[0].body[0] == Barrier()


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

    with pytest.raises(VerifyError, match="workgroup var 'w' used without an index"):
        _kernel(whole)


def test_gpu_row_sum(gpu) -> None:
    from kvdsl.runtime import run

    rng = np.random.default_rng(7)
    k = row_sum()
    for count in (WG * 3, WG * 5 + ROW):  # the second ends in a half-full workgroup
        inputs = random_inputs(rng, count)
        got = run(k, inputs, {"count": count})["dst"]
        want = expected_row_sums(inputs["src"])
        assert got.view(np.uint32).tolist() == want.view(np.uint32).tolist()


def test_naga_and_tint_accept() -> None:
    from kvdsl.runtime import compile_wgsl, tint_check

    def two_vars(kb, w, out):
        with kb.for_range("j", 0, 2):
            w[kb.lid.x] = kb.gid.x + kb.lid.x
            kb.barrier()
            out[kb.gid.x] = w[WG - 1 - kb.lid.x]
            kb.barrier()

    texts = {"row_sum": emit(row_sum()), "loop": emit(_kernel(two_vars))}
    for text in texts.values():
        compile_wgsl(text)
    assert tint_check(texts) == {name: None for name in texts}
