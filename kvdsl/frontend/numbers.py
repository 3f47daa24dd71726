"""WGSL's number literals and integer const-expressions as the frontend reads them:
:func:`parse_number` (a ``NUMBER`` token as a literal, refusing what WGSL refuses) and
:func:`const_int` (an array size, an attribute's argument or an ``@id``, from literals, module
consts and integer arithmetic)."""

from __future__ import annotations

import numpy as np
from lark import Token

from kvdsl.frontend.errors import UnsupportedError, WgslSyntaxError, WgslTypeError
from kvdsl.frontend.records import RawLit
from kvdsl.ir import tree as ir
from kvdsl.ir.ops import Op
from kvdsl.ir.types import Scalar, f16, f32, i32, u32


def parse_number(tok: Token, filename: str) -> RawLit:
    """A NUMBER token as a literal, rejecting what WGSL rejects (leading zeros, overflow)."""
    text = str(tok)
    ty: Scalar | None = None
    if text[:2] in ("0x", "0X") and ("." in text or "p" in text.lower()):
        return _hex_float(tok, text, filename)
    if text[:2] in ("0x", "0X"):
        if text[-1] in "iu":
            ty, text = (i32 if text[-1] == "i" else u32), text[:-1]
        value: int | float = int(text, 16)
        if value >= 2**64:  # past any WGSL integer; its decimal digits would be past Python's
            _bad(
                tok,
                filename,
                f"value cannot be represented as '{ty or 'abstract-int'}': a hexadecimal literal "
                "past 64 bits fits no WGSL type",
            )
    elif any(c in text for c in ".eE") or text[-1] in "fh":
        if text[-1] in "fh":
            ty, text = (f32 if text[-1] == "f" else f16), text[:-1]
        if "." not in text and "e" not in text.lower() and len(text) > 1 and text[0] == "0":
            _bad(tok, filename, "leading zeros are not allowed in a WGSL literal")
        value = float(text)
    else:
        if text[-1] in "iu":
            ty, text = (i32 if text[-1] == "i" else u32), text[:-1]
        if len(text) > 1 and text[0] == "0":
            _bad(tok, filename, "leading zeros are not allowed in a WGSL literal")
        if len(text) > 20:  # past any WGSL integer (abstract-int holds 64 bits), as Tint words it
            _bad(
                tok,
                filename,
                f"value cannot be represented as '{ty or 'abstract-int'}': an integer literal of "
                f"{len(text):,} digits fits no WGSL type",
            )
        value = int(text)
    if ty == i32 and value >= 2**31 or ty == u32 and value >= 2**32:
        _bad(tok, filename, f"literal {tok} does not fit {ty}")
    return RawLit(value, ty)


def _hex_float(tok: Token, text: str, filename: str) -> RawLit:
    """A hexadecimal float (``0x1.8p3``, ``0x.8``, ``0x1p-2f``): its exact value, refused as
    Tint refuses one past 64 mantissa bits, out of its type's range, or (suffixed) not exactly
    a value of its type."""
    ty: Scalar | None = None
    if "p" in text.lower() and text[-1] in "fh":
        ty, text = (f32 if text[-1] == "f" else f16), text[:-1]
    digits = text[2:].lower().split("p")[0].replace(".", "").lstrip("0")
    if len(digits) > 16:
        _bad(tok, filename, "mantissa is too large for hex float (more than 64 bits)")
    try:
        value = float.fromhex(text)
    except OverflowError:
        value = float("inf")
    limit = {None: 1.7976931348623157e308, f32: 3.4028234663852886e38, f16: 65504.0}[ty]
    if not abs(value) <= limit:
        _bad(tok, filename, f"value {tok} cannot be represented as '{ty or 'abstract-float'}'")
    if ty is not None and float((np.float16 if ty == f16 else np.float32)(value)) != value:
        _bad(tok, filename, f"value {tok} cannot be exactly represented as '{ty}'")
    return RawLit(value, ty)


def _bad(tok: Token, filename: str, message: str) -> None:
    raise WgslSyntaxError(message, filename, tok.line, tok.column, str(tok), ())


def const_int(e: ir.Expr, consts: dict[str, int | float], where: tuple[str, int, int]) -> int:
    """Evaluate an integer const-expression (literals, module consts, a struct const's integer
    member, integer arithmetic)."""
    match e:
        case RawLit(value, _) | ir.Lit(value, _) if isinstance(value, int):
            return value
        case ir.Name(name) if isinstance(consts.get(name), int):
            return consts[name]
        case ir.Member(ir.Name(name), field) if field in (
            consts.get(name) if isinstance(consts.get(name), dict) else ()
        ):
            return consts[name][field]  # a struct const's integer member: C.n
        case ir.Unary(Op.NEG, x):
            return -const_int(x, consts, where)
        case ir.Binary(op, a, b) if op in _CONST_OPS:
            x, y = const_int(a, consts, where), const_int(b, consts, where)
            if op in (Op.DIV, Op.MOD) and y == 0:
                raise WgslTypeError(
                    "division by zero in a const expression (integer division by zero is "
                    "invalid)",
                    *where,
                )
            return _CONST_OPS[op](x, y)
    raise UnsupportedError("expected an integer made of literals and module consts", *where)


_CONST_OPS = {
    Op.ADD: lambda x, y: x + y,
    Op.SUB: lambda x, y: x - y,
    Op.MUL: lambda x, y: x * y,
    Op.DIV: lambda x, y: abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1),
    Op.MOD: lambda x, y: (abs(x) % abs(y)) * (1 if x >= 0 else -1),
    Op.SHL: lambda x, y: x << (y & 31),
    Op.SHR: lambda x, y: x >> (y & 31),
    Op.AND: lambda x, y: x & y,
    Op.OR: lambda x, y: x | y,
    Op.XOR: lambda x, y: x ^ y,
}
