"""Names: the slot a name's value lives in, a function activation's frame, and lookup through
the scopes (see :mod:`kvdsl.interp`, Variables and Helper functions).
"""

from __future__ import annotations

import numpy as np

from kvdsl.interp.errors import InterpError
from kvdsl.ir import tree as ir
from kvdsl.interp.values import ArrayValue, Mask


class Slot:
    """A name's value; for a ``var``, the mask it was declared under (see :meth:`Assignment.assign
    <kvdsl.interp.assign.Assignment.assign>`)."""

    __slots__ = ("value", "decl", "var")

    def __init__(self, value, decl: Mask = None, var: bool = False) -> None:
        self.value = value
        self.decl = decl
        self.var = var


class Held:
    """An index already evaluated, standing in a pointer's access chain: ``&a[i]`` picks its
    element when it is taken, however ``i`` changes later. Compared by identity."""

    __slots__ = ("value",)

    def __init__(self, value: np.ndarray) -> None:
        self.value = value


class PtrValue:
    """A pointer: the access chain it points at (names, ``Index`` with :class:`Held` indices,
    ``Member``) and the slots its root names stand for. A ``var`` root is its declaring
    frame's own slot under a name no WGSL identifier takes, so a helper writes through the
    pointer into its caller's variable; a binding or workgroup root keeps its module name."""

    __slots__ = ("chain", "hidden")

    def __init__(self, chain: ir.Expr, hidden: dict[str, Slot]) -> None:
        self.chain, self.hidden = chain, hidden


class Frame:
    """One activation of the entry point or a helper: lanes that returned and the result."""

    def __init__(self, entry: Mask) -> None:
        self.entry = entry
        self.returned = 0  # how many return statements ran, to tell if a loop saw one
        self.done: np.ndarray | None = None  # lanes that returned
        self.result = None
        self.loops: list[list[Mask | bool]] = []  # per open loop: lanes that continued


class Scopes:
    """Name lookup, a mixin of :class:`kvdsl.interp.machine.Machine`, which holds ``scopes``
    (the module's names first, then the entry point's builtins, then one dict per open block),
    ``frame``, ``main``, ``builtins``, ``batch``, ``_repeated`` and ``where()``."""

    def lookup(self, name: str) -> Slot:
        """The slot ``name`` names in the innermost scope holding it (in a batch, spread over
        the batch's lanes)."""
        for scope in reversed(self.scopes):
            slot = scope.get(name)
            if slot is not None:
                return slot if self.batch is None else self._spread(slot)
        raise InterpError(f"undefined name '{name}'{self.where()}")

    def _spread(self, slot: Slot) -> Slot:
        """In a batch, a slot from outside the loop with its value repeated for every trip
        (the body never assigns one, so a copy serves)."""
        v, spread = slot.value, self.batch.spread

        def rep(x):  # arrays of arrays: each inner array's elements
            return ArrayValue(rep(y) for y in x) if type(x) is ArrayValue else spread(x)

        if type(v) is PtrValue:  # a pointer's held indices are not repeated: never batched
            return slot
        if type(v) is dict:  # frexp's or modf's result: each field repeated
            if all(rep(x) is x for x in v.values()):
                return slot
            hit = self._repeated.get(id(slot))
            if hit is None:
                value = {k: rep(x) for k, x in v.items()}
                hit = self._repeated[id(slot)] = (slot, Slot(value, None, slot.var))
            return hit[1]
        if isinstance(v, ArrayValue):
            if all(type(x) is not ArrayValue and rep(x) is x for x in v):
                return slot
        elif rep(v) is v:
            return slot
        hit = self._repeated.get(id(slot))
        if hit is None:
            value = ArrayValue(rep(x) for x in v) if isinstance(v, ArrayValue) else rep(v)
            hit = self._repeated[id(slot)] = (slot, Slot(value, None, slot.var))
        return hit[1]

    def declare(self, name: str, slot: Slot) -> None:
        """Bind ``name`` to ``slot`` in the innermost scope."""
        self.scopes[-1][name] = slot

    def _shadowed(self, name: str) -> bool:
        return any(name in scope for scope in self.scopes[1:])

    def _is_builtin(self, name: str) -> bool:
        # The entry point's builtins live in its outermost scope, out of sight of helpers.
        return (
            name in self.builtins
            and self.frame is self.main
            and not any(name in scope for scope in self.scopes[2:])
        )
