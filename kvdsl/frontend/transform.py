"""Parse tree → IR: a lark :class:`~lark.Transformer` whose rules map 1:1 to IR constructors.

The result is *raw* IR: WGSL's abstract literals (``3``, ``0.5``) stay :class:`RawLit` and a
one-argument ``T(x)`` stays :class:`RawCtor` (a conversion or a constructor, depending on the
type of ``x``) until :mod:`kvdsl.frontend.typer` has a scope to type them in. Module-scope
declarations come out as the records of :mod:`kvdsl.frontend.records`, assembled into a kernel
by :mod:`kvdsl.frontend.parser`. Every statement's source line is kept in ``lines`` (by ``id``).

:class:`ToIR` joins the rule groups: the module's declarations here, statements in
:mod:`kvdsl.frontend.statements`, expressions and types in :mod:`kvdsl.frontend.expressions`,
on the state of :class:`kvdsl.frontend.rules.Rules`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from lark import Token, v_args
from lark.tree import Meta

from kvdsl.frontend.errors import UnsupportedError, WgslTypeError
from kvdsl.frontend.expressions import VEC_ALIASES, Expressions
from kvdsl.frontend.io_attrs import IO_ATTRS, member_invariant, member_location, member_position
from kvdsl.frontend.numbers import const_int
from kvdsl.frontend.records import (
    Attr,
    ConstDecl,
    Directive,
    FnDecl,
    GlobalVar,
    Module,
    ModuleAssert,
    RawLit,
    StructDecl,
)
from kvdsl.frontend.statements import Statements
from kvdsl.ir import tree as ir
from kvdsl.ir.types import SCALARS, bool_, u32


@v_args(inline=True)
class ToIR(Statements, Expressions):
    """Rules → IR constructors: the module's declarations, and the statement and expression
    rule groups. Unknown rules raise (lark would silently pass them through)."""

    # -- module --
    def start(self, *items) -> Module:
        enables = tuple(e for i in items if isinstance(i, tuple) for e in i)
        directives = tuple(i for i in items if isinstance(i, Directive))
        decls = tuple(i for i in items if i is not None and not isinstance(i, (tuple, Directive)))
        return Module(enables, decls, directives)

    def requires(self, *names: Token) -> Directive:
        words = tuple(str(n) for n in names)
        return Directive(f"requires {', '.join(words)}", words, names[0].line, names[0].column)

    def diagnostic(self, severity: Token, rule: str) -> Directive:
        text = f"diagnostic({severity}, {rule})"
        return Directive(text, (str(severity), rule), severity.line, severity.column)

    def diagnostic_rule(self, *names: Token) -> str:
        return ".".join(map(str, names))

    @v_args(meta=True, inline=True)
    def module_assert(self, meta: Meta, cond: ir.Expr) -> ModuleAssert:
        return ModuleAssert(cond, meta.line)

    def alias(self, name: Token, ty) -> None:
        if str(name) in self.aliases:
            raise WgslTypeError(f"redeclaration of '{name}'", self.filename, name.line, name.column)
        if str(name) in SCALARS or str(name) in VEC_ALIASES:
            raise self._err(f"alias {name}: the name is taken", name.line, name.column)
        self.aliases[str(name)] = ty
        self.alias_lines[str(name)] = name.line
        return None

    def enable(self, *names: Token) -> tuple[tuple[str, int, int], ...]:
        return tuple((str(n), n.line, n.column) for n in names)

    def empty(self) -> None:
        return None

    @v_args(meta=True, inline=True)
    def struct_decl(self, meta: Meta, name: Token, *fields) -> StructDecl:
        self.member_builtins[str(name)] = self.pending_builtins
        self.pending_builtins = {}
        self.pending_locations = set()
        self.struct_fields[str(name)] = tuple(n for n, _, _ in fields)
        attrs = tuple(a for _, _, a in fields)
        layout = attrs if any(attrs) else ()
        return StructDecl(str(name), tuple((n, t) for n, t, _ in fields), meta.line, layout)

    def field(self, attrs: tuple[Attr, ...], name: Token, ty) -> tuple[str, Any, tuple[Attr, ...]]:
        io = tuple(a for a in attrs if a.name in IO_ATTRS)
        if io:
            # Stage IO, of no meaning here: checked as Tint checks it, then dropped.
            n = member_location(io, ty, self.consts, self.filename)
            if n is not None and n in self.pending_locations:
                raise WgslTypeError(
                    f"'@location({n})' appears multiple times", self.filename, io[0].line
                )
            self.pending_locations.add(n)  # (n is not None: @interpolate needs @location)
            attrs = tuple(a for a in attrs if a.name not in IO_ATTRS)
        member_position(attrs, ty, self.filename)
        if any(a.name == "invariant" for a in attrs):
            member_invariant(attrs, self.filename)  # of no meaning here: checked, dropped
            attrs = tuple(a for a in attrs if a.name != "invariant")
        for a in attrs:
            if a.name == "builtin" and len(attrs) == 1:
                # An entry point's input, where the struct is its parameter's type (the
                # kernel's builtins); of any other struct, no meaning.
                self.pending_builtins[str(name)] = a
                return str(name), ty, ()
            if a.name not in ("align", "size"):
                raise self._err(f"attribute @{a.name} on a struct member", a.line)
        return str(name), ty, tuple(attrs)

    def global_var(self, attrs, address, name: Token, ty, init) -> GlobalVar:
        space, access = address if address is not None else (None, None)
        return GlobalVar(
            attrs, space, access, str(name), ty, init is not None, name.line, name.column, init
        )

    def address(self, space: Token, access: Token | None) -> tuple[str, str | None]:
        return str(space), None if access is None else str(access)

    @v_args(meta=True, inline=True)
    def const_decl(self, meta: Meta, name: Token, ty, value: ir.Expr) -> ConstDecl:
        return self._const(name, ty, value, meta.line)

    def _const(self, name: Token, ty, value: ir.Expr, line: int) -> ConstDecl:
        if value is not None and isinstance(value, (RawLit, ir.Lit, ir.Name, ir.Unary, ir.Binary)):
            try:
                self.consts[str(name)] = const_int(value, self.consts, ("", 0, 0))
            except UnsupportedError:
                pass
        fields = self.struct_fields.get(value.name) if isinstance(value, ir.FnCall) else None
        if fields is not None and len(fields) == len(value.args):  # const C = R(4u, 2.5)
            members = {}
            for f, a in zip(fields, value.args):  # its integer members, for C.n
                try:
                    members[f] = const_int(a, self.consts, ("", 0, 0))
                except UnsupportedError:
                    pass
            self.consts[str(name)] = members
        return ConstDecl(str(name), ty, value, line)

    @v_args(meta=True, inline=True)
    def override_decl(self, meta: Meta, attrs, name: Token, ty, value) -> ConstDecl:
        """An ``override``, specialised as a pipeline is: the module ``const`` of the value
        given (by name or ``@id``), else of its initialiser."""
        key = None
        self.overridden_names.add(str(name))
        for a in attrs:
            if a.name != "id" or a.args is None or len(a.args) != 1:
                raise self._err(f"attribute @{a.name} on override {name}", a.line, a.column)
            key = str(const_int(a.args[0], self.consts, (self.filename, a.line, a.column)))
        given = [k for k in (str(name), key) if k is not None and k in self.constants]
        if len(given) == 2:  # a pipeline's constants name each override once
            raise WgslTypeError(
                f"constants: override {name} is given twice, by name ({name}="
                f"{self.constants[given[0]]}) and by its @id ({key}={self.constants[key]}): "
                "give it one value",
                self.filename,
                name.line,
                name.column,
            )
        if given:
            self.overridden.update(given)
            value = self._override_value(name, ty, value, self.constants[given[0]])
        elif value is None:
            raise WgslTypeError(
                f"override {name} has no initialiser and no value was given for it (give one: "
                f"--constants {name}=VALUE, or constants={{'{name}': VALUE}})",
                self.filename,
                name.line,
                name.column,
            )
        return replace(self._const(name, ty, value, meta.line), override=True)

    def _override_value(self, name: Token, ty, default, given) -> ir.Expr:
        """The literal of ``given`` (a number, a bool or its text) in the override's type: its
        declared one, else its initialiser literal's."""
        if ty is None and isinstance(default, RawLit):
            ty = default.ty
        if ty is None and isinstance(default, ir.Lit):
            ty = default.ty
        text = str(given).strip().lower()
        try:
            if ty == bool_ or isinstance(given, bool) or text in ("true", "false"):
                if text not in ("true", "false"):
                    raise ValueError
                return ir.Lit(text == "true", bool_)
            if ty is not None and ty.is_int or ty is None and isinstance(given, int):
                v: int | float = int(text, 0)
            else:
                v = float(text)
            if v < 0 and ty == u32:
                raise ValueError
            return RawLit(v, ty, v < 0)
        except ValueError:
            raise WgslTypeError(
                f"override {name}: the value {given!r} is not a {ty or 'number'}",
                self.filename,
                name.line,
                name.column,
            ) from None

    @v_args(meta=True, inline=True)
    def fn_decl(self, meta: Meta, attrs, name: Token, params, ret, body) -> FnDecl:
        return FnDecl(attrs, str(name), params, ret, body, meta.line, meta.end_line)

    def params(self, *params) -> tuple:
        return params

    def param(self, attrs, name: Token, ty) -> tuple:
        return attrs, str(name), ty

    def attrs(self, *attrs: Attr) -> tuple[Attr, ...]:
        return attrs

    def attribute(self, name: Token, args) -> Attr:
        return Attr(str(name), args, name.line, name.column)
