"""What the interpreter reports when a kernel does something the GPU would hide."""

from __future__ import annotations


class InterpError(RuntimeError):
    """A kernel went wrong under interpretation; the message names where and who."""


class OutOfBounds(InterpError):
    """A read or write past the end of a binding, a ``var`` or workgroup array or a vector."""


class RaceError(InterpError):
    """Two invocations of one dispatch touched the same binding element, one of them writing
    (for workgroup memory: two invocations of a workgroup, with no barrier between)."""


class UninitializedRead(InterpError):
    """With ``strict_init``: a read of a read_write or workgroup element that nothing in the
    dispatch wrote."""


class WorkBudget(InterpError):
    """A dispatch ran more statements than its budget allows (``run``'s ``max_steps``): a loop
    taken for one that never ends."""
