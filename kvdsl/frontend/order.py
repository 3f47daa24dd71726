"""Module-scope declarations in dependency order: WGSL's are order-independent, and the
transform (:mod:`kvdsl.frontend.transform`) folds array counts, struct consts' members and
aliases where it meets them, so each struct, const, override and alias a declaration names is
moved up to stand before it (``const C = R(4u);`` above ``struct R``, ``array<u32, C.n>`` above
``const C``). Every other declaration keeps its place: bindings and helpers stay in source order.
"""

from __future__ import annotations

from lark import Token, Tree

#: The declarations moved up to stand before those naming them.
HOISTED = ("struct_decl", "const_decl", "override_decl", "alias")


def _declared(decl: Tree) -> str | None:
    """The name ``decl`` declares, when it is one of :data:`HOISTED`."""
    if decl.data not in HOISTED:
        return None
    for c in decl.children:
        if isinstance(c, Token) and c.type == "NAME":
            return str(c)
    return None


def _named(decl: Tree) -> set[str]:
    """Every word ``decl`` holds (a superset of the declarations it names: a member's or a
    local's name as well, which at most moves a declaration up that needed no move)."""
    return {str(t) for t in decl.scan_values(lambda v: isinstance(v, Token) and v.type == "NAME")}


def in_dependency_order(tree: Tree) -> Tree:
    """``tree`` (the parse of a module) with each hoisted declaration placed before the first
    declaration naming it, transitively; a cycle (a name the words share by chance, or a
    declaration naming itself, which the transform refuses) keeps source order."""
    decls = list(tree.children)
    by_name: dict[str, int] = {}
    for i, d in enumerate(decls):
        name = _declared(d) if isinstance(d, Tree) else None
        if name is not None and name not in by_name:
            by_name[name] = i
    if not by_name:
        return tree
    out: list[int] = []
    placed: set[int] = set()
    visiting: set[int] = set()

    def place(i: int) -> None:
        if i in placed or i in visiting:
            return
        visiting.add(i)
        d = decls[i]
        if isinstance(d, Tree):
            own = _declared(d)
            for name in sorted(_named(d), key=lambda n: by_name.get(n, -1)):
                j = by_name.get(name)
                if j is not None and name != own:
                    place(j)
        visiting.discard(i)
        placed.add(i)
        out.append(i)

    for i in range(len(decls)):
        place(i)
    if out == list(range(len(decls))):
        return tree
    return Tree(tree.data, [decls[i] for i in out], tree._meta)
