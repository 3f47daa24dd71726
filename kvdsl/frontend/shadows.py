"""Declarations that take a predeclared name, as WGSL scopes them, on the parse tree before it
becomes IR.

WGSL lets a declaration take the name of a predeclared type or builtin (``let u32 = 1u;``,
module-scope ``const vec4f = 1u;``): in the declaration's scope (its block, from the
declaration on; a module-scope one's is the whole module) the name is the declaration's, and
naming it as a type there is an error ("cannot use 'let u32' as type", as Tint words it). kvdsl
reads those names as the types wherever they appear, and prints types with them, so each such
declaration and its uses take a fresh name here (``u32_``), one the module's text does not hold;
a function-scope declaration named like an alias (``let vec4f``) keeps its name (no printed type
names one). A module-scope declaration of any kind (a binding, a var, an override, a struct, an
alias, a const, a function) is renamed so too, the whole module its scope; a struct's or an
alias's name stays a type there, named and called (a constructor) by its new name.
"""

from __future__ import annotations

from lark import Token, Tree

from kvdsl.frontend.errors import WgslTypeError
from kvdsl.ir.scope import BUILTIN_FUNCTIONS, PREDECLARED, SHADOWABLE

#: The module-scope declarations whose names this may change, by rule, with the word a message
#: gives them.
_MODULE = {
    "const_decl": "const",
    "fn_decl": "function",
    "global_var": "var",
    "override_decl": "override",
    "struct_decl": "struct",
    "alias": "alias",
}
#: The rules of the type generators' keywords, each with the keyword where the tree does not
#: keep its token (None: the rule's first child is the keyword's token).
_GENERATORS = {
    "vec_type": None,
    "mat_type": None,
    "vec_inferred": None,
    "mat_inferred": None,
    "runtime_array_type": "array",
    "fixed_array_type": "array",
    "array_inferred": "array",
    "bitcast": "bitcast",
}
_INFERRED = {"vec_inferred", "mat_inferred", "array_inferred"}
#: The kinds of declaration whose name is a type: naming it as a type, or calling it (a
#: constructor), is using it.
_TYPES = {"struct", "alias"}
#: The function-scope ones.
_LOCAL = {"let": "let", "local_var": "var", "local_const": "const", "param": "parameter"}
#: Where a block of its own opens a scope.
_SCOPED = {"block", "loop_body", "continuing", "for_"}
#: The barriers the grammar reads as statements of their own.
_BARRIERS = {"barrier": "workgroupBarrier", "storage_barrier": "storageBarrier"}


class _Walk:
    def __init__(self, words: frozenset[str], filename: str):
        self.words = set(words)
        self.filename = filename
        self.scopes: list[dict[str, tuple[str, str]]] = []  # name -> (kind, name it takes)
        self.renamed: dict[str, str] = {}  # a module-scope declaration's new name -> its own

    def fresh(self, name: str) -> str:
        new = name + "_"
        while new in self.words:
            new += "_"
        self.words.add(new)
        return new

    def lookup(self, name: str) -> tuple[str, str] | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def declare(self, tree: Tree, kind: str, module: bool) -> None:
        """Put ``tree``'s declared name in the innermost scope, renamed where kvdsl would read it
        as the predeclared type or builtin."""
        i, tok = next((i, c) for i, c in enumerate(tree.children) if _is_name(c))
        name = str(tok)
        new = name
        if name in PREDECLARED and (module or name not in SHADOWABLE):
            new = self.fresh(name)
            tree.children[i] = tok.update(value=new)
            if module:
                self.renamed[new] = name
        self.scopes[-1][name] = (kind, new)

    def module(self, tree: Tree) -> None:
        self.scopes.append({})
        for decl in tree.children:
            if isinstance(decl, Tree) and decl.data in _MODULE:
                self.declare(decl, _MODULE[decl.data], True)
        for decl in tree.children:
            if isinstance(decl, Tree) and decl.data == "fn_decl":
                self.function(decl)
            elif isinstance(decl, Tree):
                self.visit(decl)

    def function(self, fn: Tree) -> None:
        """The parameters' and the return type first, then the parameters declared for the
        body."""
        params = next(c for c in fn.children if isinstance(c, Tree) and c.data == "params")
        for child in fn.children:
            if isinstance(child, Tree) and child.data != "block":
                self.visit(child)
        self.scopes.append({})
        for p in params.children:
            self.declare(p, "parameter", False)
        self.visit(fn.children[-1])
        self.scopes.pop()

    def visit(self, tree: Tree) -> None:
        data = tree.data
        if data in _SCOPED:
            self.scopes.append({})
        if data in _LOCAL and data != "param":
            for child in tree.children:
                if isinstance(child, Tree):
                    self.visit(child)
            self.declare(tree, _LOCAL[data], False)
        elif data in ("name", "call"):
            self.use(tree, data == "call")
        elif data in _BARRIERS and self.lookup(_BARRIERS[data]) is not None:
            kind = self.lookup(_BARRIERS[data])[0]
            raise WgslTypeError(
                f"cannot use '{kind} {_BARRIERS[data]}' as call target (the {kind} takes the "
                "name of the builtin here)",
                self.filename,
                tree.meta.line if not tree.meta.empty else None,
            )
        elif data in ("named_type", "template_type"):
            self.type_use(tree)
        elif data in _GENERATORS:
            self.generator_use(tree)
        else:
            for child in tree.children:
                if isinstance(child, Tree):
                    self.visit(child)
        if data in _SCOPED:
            self.scopes.pop()

    def use(self, tree: Tree, call: bool) -> None:
        tok = tree.children[0]
        found = self.lookup(str(tok))
        if found is not None:
            kind, new = found
            # A call of a value; of an alias's or an op-table builtin's name, the typer's.
            if (
                call
                and kind not in ("function", *_TYPES)
                and str(tok) not in (SHADOWABLE | BUILTIN_FUNCTIONS)
            ):
                why = ""
                if str(tok) in PREDECLARED:
                    why = f" (the {kind} takes the name of the type or builtin here)"
                raise WgslTypeError(
                    f"cannot use {_what(kind, tok)} as call target{why}",
                    self.filename,
                    tok.line,
                    tok.column,
                )
            if new != str(tok):
                tree.children[0] = tok.update(value=new)
        for child in tree.children[1:]:
            if isinstance(child, Tree):
                self.visit(child)

    def generator_use(self, tree: Tree) -> None:
        """A type generator (``vec2<u32>``, ``vec2(...)``, ``array<f32, 4>``, ``bitcast<T>``):
        refused, as Tint refuses it, where a declaration takes the generator's name."""
        tok = tree.children[0] if tree.children and isinstance(tree.children[0], Token) else None
        name = str(tok) if tok is not None else _GENERATORS[tree.data]
        found = self.lookup(name)
        if found is not None:
            kind = found[0]
            line = tok.line if tok is not None else tree.meta.line
            column = tok.column if tok is not None else tree.meta.column
            if tree.data in _INFERRED:  # vec2(...), array(...): a call of the declaration
                why = f"cannot use {_what(kind, name)} as call target"
            else:
                noun = (
                    "function" if kind == "function" else "type" if kind in _TYPES else "variable"
                )
                why = f"{noun} '{name}' does not take template arguments"
            raise WgslTypeError(why, self.filename, line, column)
        for child in tree.children:
            if isinstance(child, Tree):
                self.visit(child)

    def type_use(self, tree: Tree) -> None:
        tok = tree.children[0]
        found = self.lookup(str(tok))
        if found is not None and found[0] in _TYPES:
            tree.children[0] = tok.update(value=found[1])  # a struct or alias: its own name
        elif found is not None:
            what = _what(found[0], tok)
            raise WgslTypeError(f"cannot use {what} as type", self.filename, tok.line, tok.column)
        for child in tree.children[1:]:
            if isinstance(child, Tree):
                self.visit(child)


def _what(kind: str, name: str) -> str:
    """A declaration as Tint names it in an error: ``'let x'``, ``parameter 'x'``."""
    return f"parameter '{name}'" if kind == "parameter" else f"'{kind} {name}'"


def _is_name(x: object) -> bool:
    return isinstance(x, Token) and x.type == "NAME"


def resolve_shadows(tree: Tree, words: frozenset[str], filename: str) -> dict[str, str]:
    """Rename, in ``tree``, the declarations that take a predeclared name kvdsl reads as the
    type or builtin, and their uses in their scopes; refuse such a name used as a type where a
    declaration takes it (but a struct's or an alias's), as WGSL does. The module-scope
    declarations renamed: new name -> the name the text gives it."""
    walk = _Walk(words, filename)
    walk.module(tree)
    return walk.renamed
