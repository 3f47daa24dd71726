"""The records the parse-tree transformer (:mod:`kvdsl.frontend.transform`) makes besides IR:
*raw* nodes, which the typing pass (:mod:`kvdsl.frontend.typer`) replaces by concrete IR (an
abstract literal, a conversion or constructor not yet told apart, a ``let`` with its declared
type), and module declarations, which :mod:`kvdsl.frontend.parser` assembles into a kernel."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvdsl.ir import tree as ir
from kvdsl.ir.types import Array, Mat, Scalar, Vec

# ---- raw nodes (replaced by concrete IR in the typing pass) ----------------------------------


@dataclass(frozen=True, slots=True)
class RawLit:
    """A literal; ``ty`` is None for WGSL's abstract int / float literals."""

    value: int | float
    ty: Scalar | None
    negated: bool = False  # a unary minus already folded in: "- -2" stays a Unary


@dataclass(frozen=True, slots=True)
class RawCtor:
    """``T(args)``: a conversion or a value constructor, decided by the arguments' types."""

    ty: Scalar | Vec | Mat | MatShape | VecShape | ArrayShape | Array
    args: tuple[ir.Expr, ...]


@dataclass(frozen=True, slots=True)
class MatShape:
    """``matCxR`` without an element type (``mat2x2(1.0, 0.0, 0.0, 1.0)``): WGSL infers it from
    the constructor's arguments."""

    c: int
    r: int


@dataclass(frozen=True, slots=True)
class VecShape:
    """``vecN`` without an element type (``vec4(1u, 2u, 3u, 4u)``, ``vec3(x)``): WGSL infers it
    from the constructor's arguments."""

    n: int


@dataclass(frozen=True, slots=True)
class ArrayShape:
    """``array`` without an element type or count (``array(1u, 2u)``): WGSL infers both from
    the constructor's arguments."""


@dataclass(frozen=True, slots=True)
class RawAddress:
    """``&x``: ``arrayLength(&binding)``'s argument, else a pointer (``ir.AddressOf``)."""

    x: ir.Expr
    line: int
    column: int


@dataclass(frozen=True, slots=True)
class RawLet:
    """``let`` or function-scope ``const`` (``const``), with its optional declared type."""

    name: str
    ty: Scalar | Vec | Array | None
    value: ir.Expr
    const: bool = False


@dataclass(frozen=True, slots=True)
class RawVar:
    """A function-scope ``var`` whose type may come from its initialiser."""

    name: str
    ty: Scalar | Vec | Array | None
    init: ir.Expr | None


@dataclass(frozen=True, slots=True)
class CallStmt:
    """A statement that is only an expression (WGSL allows calls there; the IR has no such node)."""

    expr: ir.Expr
    at: tuple[int, int] | None = None  # a builtin's call: where it stands, for the refusal


@dataclass(frozen=True, slots=True)
class Phony:
    """``_ = e;``: ``e`` evaluated for its calls, its value dropped (the IR has no such node)."""

    expr: ir.Expr


# ---- module records ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StructRef:
    """A type named by an identifier that is not a predeclared type (the params struct)."""

    name: str
    line: int
    column: int


@dataclass(frozen=True, slots=True)
class Attr:
    name: str
    args: tuple[ir.Expr, ...] | None
    line: int
    column: int


@dataclass(frozen=True, slots=True)
class StructDecl:
    name: str
    fields: tuple[tuple[str, Any], ...]
    line: int
    #: Each member's attributes (``@align(n)``, ``@size(n)``), or empty where none has any.
    attrs: tuple[tuple[Attr, ...], ...] = ()


@dataclass(frozen=True, slots=True)
class GlobalVar:
    attrs: tuple[Attr, ...]
    space: str | None
    access: str | None
    name: str
    ty: Any
    has_init: bool
    line: int
    column: int
    init: Any = None  # the initialiser's expression (a var<private>'s is kept)


@dataclass(frozen=True, slots=True)
class ConstDecl:
    name: str
    ty: Scalar | None
    value: ir.Expr
    line: int
    override: bool = False  # an ``override``, specialised to its value


@dataclass(frozen=True, slots=True)
class FnDecl:
    attrs: tuple[Attr, ...]
    name: str
    params: tuple[tuple[tuple[Attr, ...], str, Any], ...]
    ret: Any
    body: tuple[ir.Stmt, ...]
    line: int  # the line of its first attribute, or of "fn"
    end_line: int = 0  # the line of its closing brace


@dataclass(frozen=True, slots=True)
class Directive:
    """A ``requires`` or ``diagnostic`` directive: its WGSL text without the semicolon."""

    text: str
    words: tuple[str, ...]  # the language features required, or (severity, rule)
    line: int
    column: int


@dataclass(frozen=True, slots=True)
class ModuleAssert:
    """A module-scope ``const_assert``."""

    cond: ir.Expr
    line: int


@dataclass(frozen=True, slots=True)
class Module:
    enables: tuple[tuple[str, int, int], ...]
    decls: tuple[StructDecl | GlobalVar | ConstDecl | FnDecl | ModuleAssert, ...]
    directives: tuple[Directive, ...] = ()
