"""``show(node)``: a compact, WGSL-like rendering of an IR node for error messages.

The verifier, the uniformity analysis and the interpreter name the node at fault with it; the
emitter's text is the module itself, this one a line of a message.
"""

from __future__ import annotations

from typing import Callable

from kvdsl.ir import tree as ir
from kvdsl.ir import ops
from kvdsl.ir.types import bool_, is_result_struct


def show(node: object) -> str:
    """A compact, WGSL-like rendering of an expression for error messages."""
    match node:
        case ir.Lit(value, ty):
            suffix = {"u32": "u", "i32": "i", "f32": "f", "f16": "h"}.get(ty.name, "")
            return f"{str(value).lower() if ty == bool_ else value}{suffix}"
        case ir.Name(name):
            return name
        case ir.Unary(op, x):
            return f"{ops.info(op).spelling}{show(x)}"
        case ir.Binary(op, a, b):
            return f"({show(a)} {ops.info(op).spelling} {show(b)})"
        case ir.Index(base, index):
            return f"{_primary(base)}[{show(index)}]"
        case ir.Member(base, name):
            return f"{_primary(base)}.{name}"
        case ir.AtomicCall(fn, target, args):
            ptr = show(target.x) if type(target) is ir.Deref else "&" + show(target)
            return f"atomic{fn}({', '.join([ptr, *map(show, args)])})"
        case ir.Let() | ir.Var() | ir.Assign() | ir.Barrier() | ir.CallStmt() | ir.ConstAssert():
            return statement(node, show)
        case ir.AtomicStmt():
            return statement(node, show)
    text = call_text(node, show, lambda args: ", ".join(map(show, args)))
    return type(node).__name__ if text is None else text


def _given(*args) -> tuple:
    """A texture builtin's arguments, those it is not given (None) left out."""
    return tuple(a for a in args if a is not None)


def call_text(
    e: object, expr: Callable[[ir.Expr], str], arguments: Callable[[tuple[ir.Expr, ...]], str]
) -> str | None:
    """A call-shaped expression's WGSL text (a builtin or helper call, a constructor, a
    conversion, a bitcast, ``arrayLength``, ``textureDimensions``, ``textureLoad``, ``workgroupUniformLoad``), its operand printed by
    ``expr`` and its argument lists by ``arguments`` (:func:`show`'s or the emitter's); None
    for any other node."""
    match e:
        case ir.Call(op, args):
            return f"{ops.info(op).spelling}({arguments(args)})"
        case ir.FnCall(name, args):
            return f"{name}({arguments(args)})"
        case ir.Construct(ty, args):
            return f"{ty}({arguments(args)})"
        case ir.Convert(ty, x):
            return f"{ty}({expr(x)})"
        case ir.Bitcast(ty, x):
            return f"bitcast<{ty}>({expr(x)})"
        case ir.UniformLoad(x):
            return f"workgroupUniformLoad({expr(x)})"
        case ir.ArrayLength(name, None, True):
            return f"arrayLength({name})"
        case ir.ArrayLength(name, member):
            return f"arrayLength(&{name}{'' if member is None else '.' + member})"
        case ir.TextureDimensions(name, None):
            return f"textureDimensions({name})"
        case ir.TextureDimensions(name, level):
            return f"textureDimensions({name}, {expr(level)})"
        case ir.TextureLoad(name, coords, None, None):
            return f"textureLoad({name}, {expr(coords)})"
        case ir.TextureLoad(name, coords, None, layer):  # a storage texture array's
            return f"textureLoad({name}, {arguments((coords, layer))})"
        case ir.TextureLoad(name, coords, level, None):
            return f"textureLoad({name}, {arguments((coords, level))})"
        case ir.TextureLoad(name, coords, level, layer):
            return f"textureLoad({name}, {arguments((coords, layer, level))})"
        case ir.TextureSampleLevel(name, sampler, coords, level, layer, offset):
            rest = _given(coords, layer, level, offset)
            return f"textureSampleLevel({name}, {sampler}, {arguments(rest)})"
        case ir.TextureSampleCompare(name, sampler, coords, ref, layer, gather, offset):
            call = "textureGatherCompare" if gather else "textureSampleCompareLevel"
            return f"{call}({name}, {sampler}, {arguments(_given(coords, layer, ref, offset))})"
        case ir.TextureGather(name, sampler, coords, component, layer, offset):
            first = () if component is None else (expr(component),)
            rest = map(expr, _given(coords, layer, offset))
            return f"textureGather({', '.join((*first, name, sampler, *rest))})"
        case ir.TextureSampleGrad(name, sampler, coords, ddx, ddy, layer, offset):
            rest = _given(coords, layer, ddx, ddy, offset)
            return f"textureSampleGrad({name}, {sampler}, {arguments(rest)})"
        case ir.TextureSampleBaseClampToEdge(name, sampler, coords):
            return f"textureSampleBaseClampToEdge({name}, {sampler}, {expr(coords)})"
        case ir.TextureNumLevels(name):
            return f"textureNumLevels({name})"
        case ir.TextureNumLayers(name):
            return f"textureNumLayers({name})"
        case ir.TextureNumSamples(name):
            return f"textureNumSamples({name})"
    return None


def statement(s: ir.Stmt, expr: Callable[[ir.Expr], str]) -> str | None:
    """A simple statement's WGSL text without its semicolon, its expressions printed by
    ``expr`` (:func:`show` here, the emitter's minimal parentheses there); None for a statement
    with a body."""
    match s:
        case ir.Let(name, value):
            return f"let {name} = {expr(value)}"
        case ir.Var(name, ty, init) if init is not None and is_result_struct(ty):
            return f"var {name} = {expr(init)}"  # frexp's and modf's: WGSL cannot spell it
        case ir.Var(name, ty, init):
            return f"var {name}: {ty}" + ("" if init is None else f" = {expr(init)}")
        case ir.Assign(target, value, op):
            eq = "=" if op is None else ops.info(op).spelling + "="
            return f"{expr(target)} {eq} {expr(value)}"
        case ir.Return(value):
            return "return" if value is None else f"return {expr(value)}"
        case ir.Break():
            return "break"
        case ir.Continue():
            return "continue"
        case ir.Barrier(space):
            return f"{space}Barrier()"
        case ir.CallStmt(call):
            return expr(call)
        case ir.AtomicStmt(call):
            return expr(call)
        case ir.TextureStore(name, coords, value, None):
            return f"textureStore({name}, {expr(coords)}, {expr(value)})"
        case ir.TextureStore(name, coords, value, layer):
            return f"textureStore({name}, {expr(coords)}, {expr(layer)}, {expr(value)})"
        case ir.ConstAssert(cond):
            return f"const_assert {expr(cond)}"
    return None


def _primary(e: ir.Expr) -> str:
    """``show(e)`` as the base of an index or a member: a unary operation parenthesised
    (``(~v).y``; a binary one shows its own parentheses)."""
    return f"({show(e)})" if type(e) is ir.Unary else show(e)


def loop_head(s: ir.For) -> str:
    """A ``for`` statement's head, its body elided: ``for (var i = 0u; (i < n); ...) { ... }``."""
    return (
        "for ("
        + "; ".join(show(x) if x is not None else "" for x in (s.init, s.cond, s.update))
        + ") { ... }"
    )
