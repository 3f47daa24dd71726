"""What some WebGPU implementation runs other than WGSL says: the constructs of a kernel that
met such a deviation on a real GPU, each with the statement it is in.

Found by generated kernels run on an H200 under wgpu-native and Dawn against the interpreter
(``tests/test_exec_fuzz.py``; ``docs/performance.md``, *Integer kernels on the H200*). The
kernel is valid WGSL and means what the interpreter says; on those platforms it runs otherwise,
so ``kvdsl check`` names them as notes (not problems) and a host can decide.
"""

from __future__ import annotations

from typing import Any

from kvdsl.ir.nodes import Assign, Binary, Call, Kernel, Stmt
from kvdsl.ir.ops import Op
from kvdsl.ir.types import Vec, i32
from kvdsl.ir.verify import Checker, Scope, verify

SIGNED_REMAINDER = (
    "a % of i32 values: wgpu-native 0.32 (and Firefox's wgpu before gfx-rs/wgpu#9674) lowers "
    "it to SPIR-V OpSRem, which Vulkan leaves undefined for a negative operand; on NVIDIA "
    "-7 % 2 gives 1 where WGSL says -1"
)
MAX_OF_ABS = (
    "an i32 max or min of an abs: under Dawn on an NVIDIA H200 the abs was sometimes dropped "
    "(max(a, abs(b)) ran as max(a, b)), depending on the rest of the module"
)


def _signed(ty: Any) -> bool:
    return ty is i32 or (isinstance(ty, Vec) and ty.elem is i32)


class _Watch(Checker):
    """The verifier's checker, noting each hazardous expression with its innermost statement."""

    def __init__(self, kernel: Kernel) -> None:
        super().__init__(kernel)
        self.now: Stmt | None = None
        self.found: list[tuple[Stmt | None, str]] = []
        self.seen: set[tuple[int, str]] = set()  # by the statement's identity: two equal
        # statements on two lines are two notes

    def note(self, why: str) -> None:
        if (id(self.now), why) not in self.seen:
            self.seen.add((id(self.now), why))
            self.found.append((self.now, why))

    def stmt(self, s: Stmt, scope: Scope, ret: Any, loop: bool) -> None:
        outer, self.now = self.now, s
        try:
            super().stmt(s, scope, ret, loop)
            if type(s) is Assign and s.op is Op.MOD and _signed(self.type_of(s.value, scope)):
                self.note(SIGNED_REMAINDER)
        finally:
            self.now = outer

    def type_of(self, e: Any, scope: Scope) -> Any:
        ty = super().type_of(e, scope)
        if type(e) is Binary and e.op is Op.MOD and _signed(ty):
            self.note(SIGNED_REMAINDER)
        elif (
            type(e) is Call
            and e.op in (Op.MAX, Op.MIN, Op.CLAMP)
            and _signed(ty)
            and any(type(a) is Call and a.op is Op.ABS for a in e.args)
        ):
            self.note(MAX_OF_ABS)
        return ty


def hazards(kernel: Kernel) -> list[tuple[Stmt | None, str]]:
    """``(statement, why)`` for each construct of ``kernel`` (verified on the way) that a WebGPU
    implementation was found to run other than WGSL says, in the order met; the statement is
    None for one outside any (a module const)."""
    watch = _Watch(kernel)
    verify(kernel, watch)
    return watch.found
