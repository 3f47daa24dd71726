"""llvmpipe's loop cap in ``kvdsl run``: a GPU result that may have met it is refused.

llvmpipe ends an invocation's loops after 65,535 trips, all of them together, silently
(:data:`kvdsl.ir.portability.LLVMPIPE_LOOPS`). A kernel whose loop trips are fixed when the
shader compiles and add up to no more (:func:`kvdsl.ir.portability.llvmpipe_loops`) cannot meet
it. For any other kernel the interpreter counts the trips of the same dispatch: it runs every
invocation of a chunk in lockstep, each loop for as many trips as its longest invocation
needs, so its count is at least what any one invocation, or llvmpipe's eight run together,
makes. A count past the cap refuses the GPU's result (it may refuse one that an invocation's
own trips kept under it, never pass one that met it).
"""

from __future__ import annotations

import numpy as np

from kvdsl.ir import Kernel


class LoopCapError(RuntimeError):
    """The GPU's result may be cut short by llvmpipe's loop cap."""


def on_llvmpipe() -> bool:
    """Whether the adapter kernels run on is llvmpipe."""
    from kvdsl.runtime import adapter_info

    return adapter_info()["vendor"] == "llvmpipe"


def check_loop_cap(
    name: str,
    kernel: Kernel,
    counted: dict | None,
    interpret,
    lines: dict[int, int] | None,
) -> None:
    """Raise :class:`LoopCapError` where ``kernel``'s GPU result on llvmpipe may have met the
    loop cap. ``counted`` is the interpreter's ``loop_trips`` of this dispatch (marked at the
    cap), or None: then ``interpret(loop_trips)`` runs the interpreter to count them."""
    from kvdsl.interp import WorkBudget
    from kvdsl.ir.portability import LLVMPIPE_LOOP_TRIPS, LLVMPIPE_LOOPS, llvmpipe_loops

    total, _ = llvmpipe_loops(kernel)
    if (total is not None and total <= LLVMPIPE_LOOP_TRIPS) or not on_llvmpipe():
        return
    if counted is None:
        counted = {"mark": LLVMPIPE_LOOP_TRIPS}
        try:
            interpret(counted)
        except WorkBudget:
            if "past" not in counted:  # the budget ended it before the count told
                raise
    if "past" not in counted:
        return
    line = (lines or {}).get(id(counted["past"]))
    raise LoopCapError(
        f"{name}{'' if line is None else f':{line}'}: the GPU's result may be cut short: "
        f"the interpreter counts up to {counted['most']:,} loop trips for one invocation of "
        f"this dispatch, and {LLVMPIPE_LOOPS} (--backend interp runs it)"
    )


def fresh_copies(buffers: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Fresh copies of ``buffers`` for a run that must not see another's writes."""
    return {k: v.copy() for k, v in buffers.items()}
