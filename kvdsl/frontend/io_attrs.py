"""A struct member's IO attributes, ``@location(n)`` and ``@interpolate(type[, sampling])``:
an entry point's inputs and outputs between shader stages, with no meaning in a compute shader's
struct of values or memory. Checked as Tint checks them, then dropped (the IR holds no such
attribute, and the member prints back without them)."""

from __future__ import annotations

from typing import Any

from kvdsl.frontend.errors import WgslTypeError
from kvdsl.frontend.numbers import const_int
from kvdsl.frontend.records import Attr
from kvdsl.ir import tree as ir
from kvdsl.ir.types import Scalar, Vec, bool_, f32

IO_ATTRS = frozenset({"location", "interpolate"})
#: ``@interpolate``'s types, each with the samplings it takes.
INTERPOLATION = {
    "flat": ("first", "either"),
    "perspective": ("center", "centroid", "sample"),
    "linear": ("center", "centroid", "sample"),
}


def member_location(attrs: tuple[Attr, ...], ty: Any, consts: dict, filename: str) -> int | None:
    """The ``@location`` of a member with ``attrs`` (its IO attributes) of type ``ty``, None
    where it has none; a :class:`WgslTypeError` where Tint refuses them."""
    where = {a.name: a for a in attrs}
    loc = where.get("location")
    for a in attrs:
        if sum(b.name == a.name for b in attrs) > 1:
            raise WgslTypeError(f"duplicate {a.name} attribute", filename, a.line, a.column)
    interp = where.get("interpolate")
    if interp is not None and loc is None:
        raise WgslTypeError(
            "'@interpolate' can only be used with '@location'", filename, interp.line, interp.column
        )
    if loc is None:
        return None
    at = (filename, loc.line, loc.column)
    if not loc.args or len(loc.args) != 1:
        raise WgslTypeError("@location takes one argument, the location", *at)
    n = const_int(loc.args[0], consts, at)
    if n < 0:
        raise WgslTypeError("'@location' value must be non-negative", *at)
    scalar = ty.scalar if isinstance(ty, Vec) else ty
    if not isinstance(scalar, Scalar) or scalar == bool_:
        raise WgslTypeError(
            f"cannot apply '@location' to declaration of type '{ty}' (a numeric scalar or "
            "vector)",
            *at,
        )
    if interp is not None:
        _interpolation(interp, scalar, filename)
    return n


def _interpolation(a: Attr, scalar: Scalar, filename: str) -> None:
    at = (filename, a.line, a.column)
    args = a.args or ()
    words = [x.name if isinstance(x, ir.Name) else None for x in args]
    if not 1 <= len(words) <= 2 or words[0] not in INTERPOLATION:
        raise WgslTypeError(
            f"@interpolate takes an interpolation type ({', '.join(INTERPOLATION)}) and an "
            "optional sampling",
            *at,
        )
    if len(words) == 2 and words[1] not in INTERPOLATION[words[0]]:
        raise WgslTypeError(
            f"@interpolate({words[0]}, {words[1]}): {words[0]} takes the sampling "
            f"{', '.join(INTERPOLATION[words[0]])}",
            *at,
        )
    if words[0] != "flat" and scalar.name in ("i32", "u32"):
        raise WgslTypeError(
            "interpolation type must be 'flat' for integral user-defined IO types", *at
        )


def member_invariant(attrs: tuple[Attr, ...], filename: str) -> None:
    """Check a member's ``@invariant`` (among its attributes ``attrs``) as Tint checks it: once,
    without arguments, beside ``@builtin(position)``. A vertex shader's output, it has no
    meaning in a compute shader, so the member is taken without it."""
    marks = [a for a in attrs if a.name == "invariant"]
    a = marks[0]
    if a.args is not None:
        raise WgslTypeError(
            "invariant attribute doesn't take parenthesis", filename, a.line, a.column
        )
    if len(marks) > 1:
        raise WgslTypeError(
            "duplicate invariant attribute", filename, marks[1].line, marks[1].column
        )
    position = any(
        b.name == "builtin" and b.args and len(b.args) == 1 and b.args[0] == ir.Name("position")
        for b in attrs
    )
    if not position:
        raise WgslTypeError(
            "'@invariant' must be applied to a position builtin", filename, a.line, a.column
        )


def member_position(attrs: tuple[Attr, ...], ty: Any, filename: str) -> None:
    """A member's ``@builtin(position)`` (a vertex output, a fragment input; of no meaning in a
    compute shader's struct) is of ``vec4<f32>``, as Tint checks it."""
    for a in attrs:
        if a.name == "builtin" and a.args == (ir.Name("position"),):
            if isinstance(ty, (Scalar, Vec)) and ty != Vec(4, f32):
                raise WgslTypeError(
                    "store type of '@builtin(position)' must be 'vec4<f32>'",
                    filename,
                    a.line,
                    a.column,
                )
