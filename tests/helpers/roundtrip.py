"""The round trip through the text form (``parse(emit(k)) == k`` and back), and pieces of the
kernel generators that build on it: literals of a type, edge values likely, and fresh names."""

from __future__ import annotations

import dataclasses

from hypothesis import strategies as st

from kvdsl.emit import emit
from kvdsl.frontend import parse
from kvdsl.frontend.abstract import canonical
from kvdsl.ir.tree import Kernel, Lit
from kvdsl.ir.types import bool_, f16, i32, u32


def assert_round_trip(k: Kernel) -> None:
    text = emit(k)
    parsed = parse(text)
    assert dataclasses.replace(parsed, name=k.name, dispatch=k.dispatch) == k
    assert emit(parsed) == text


def _float_lit(ty):
    width = 16 if ty == f16 else 32
    floats = st.floats(width=width, allow_nan=False, allow_infinity=False)
    return floats.map(lambda x: Lit(canonical(x, ty), ty))


def literals(ty):
    """Literals of ``ty``, edge values likely."""
    if ty == bool_:
        return st.booleans().map(lambda b: Lit(b, bool_))
    if ty == u32:
        return st.one_of(
            st.sampled_from([0, 1, 2**31, 2**32 - 1]), st.integers(0, 2**32 - 1)
        ).map(lambda v: Lit(v, u32))
    if ty == i32:
        edges = st.sampled_from([0, -1, 1, -(2**31), 2**31 - 1])
        return st.one_of(edges, st.integers(-(2**31), 2**31 - 1)).map(lambda v: Lit(v, i32))
    return _float_lit(ty)


class Fresh:
    def __init__(self) -> None:
        self.n = 0

    def __call__(self, stem: str) -> str:
        self.n += 1
        return f"{stem}{self.n}"
