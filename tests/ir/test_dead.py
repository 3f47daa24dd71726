"""Dead lets (kvdsl.ir.dead): the builder drops unread arithmetic lets, keeps dead loads, and the
kernel computes the same values without them."""

from __future__ import annotations

import numpy as np

from kvdsl import catalog
from kvdsl.emit import emit
from kvdsl.interp import run as interp_run
from kvdsl.ir import Dispatch, KernelBuilder, f32, u32
from kvdsl.ir.dead import drop_dead_lets
from kvdsl.ir.tree import Assign, Binary, Block, For, If, Index, Let, Lit, Name
from kvdsl.ir.ops import Op


def lets(stmts) -> list[str]:
    """The names of every let in ``stmts``, nested blocks included, in order."""
    out = []
    for s in stmts:
        if isinstance(s, Let):
            out.append(s.name)
        for body in ("then", "orelse", "body"):
            out += lets(getattr(s, body, ()))
    return out


def add(a, b):
    return Binary(Op.ADD, a, b)


def test_unread_arithmetic_goes_and_so_does_what_only_it_read():
    one = Lit(1, u32)
    body = (
        Let("a", one),
        Let("b", add(Name("a"), one)),  # read only by c, which nothing reads
        Let("c", add(Name("b"), one)),
        Let("kept", one),
        If(Binary(Op.LT, Name("kept"), one), (Let("inner", one), Block((Let("deep", one),)))),
        For(None, None, None, (Let("inLoop", add(Name("kept"), one)),)),
        Let("load", Index(Name("buf"), one)),  # a dead load stays
    )
    out = drop_dead_lets(body)
    assert lets(out) == ["kept", "load"]
    assert drop_dead_lets(out) is out  # nothing left to drop: the same tuple


def test_a_name_read_in_a_nested_block_keeps_its_let():
    one, two = Lit(1, u32), Lit(2, u32)
    store = Assign(Index(Name("buf"), one), Name("x"))
    body = (Let("x", one), If(Binary(Op.LT, one, two), (store,)))
    assert lets(drop_dead_lets(body)) == ["x"]
    # An inner let of the same spelling: both stay (the pass matches names, not scopes).
    shadowed = (Let("x", one), If(Binary(Op.LT, one, two), (Let("x", two), store)))
    assert lets(drop_dead_lets(shadowed)) == ["x", "x"]


def test_kernels_lose_unread_lets_and_keep_their_results():
    kb = KernelBuilder("dead", 4)
    src = kb.binding("src", f32)
    dst = kb.binding("dst", f32, "read_write")
    i = kb.let("i", kb.gid.x)
    kb.let("unused", i * 3 + 1)
    kb.let("deadLoad", src[i + 1])
    dst[i] = src[i] * 2.0
    kernel = kb.build(Dispatch(Lit(8, u32), 4, 65535))
    text = emit(kernel)
    assert "unused" not in text and "let deadLoad = src[i + 1u];" in text
    x = np.arange(1, 10, dtype=np.float32)
    got = interp_run(kernel, {"src": x, "dst": np.full(8, np.nan, np.float32)}, {})["dst"]
    np.testing.assert_array_equal(got, x[:8] * 2)


def test_the_copy_kernels_name_no_row():
    """The flat copy reads its item index only: the walk's row and vector names go."""
    text = emit(catalog.build("copy_flat_llama31_8b"))
    assert "let e = " in text and "let row" not in text and "let d4" not in text
