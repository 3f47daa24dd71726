"""A module's declarations as the kernel's interface (:class:`Interface`): the structs that
storage, workgroup memory and function scope name, resolved and checked member by member; the
uniform's struct as the kernel's params; the storage bindings in binding-number order, with the
host data type a ``// host: T`` comment names; the ``var<workgroup>`` declarations. Each refusal
names the declaration and its line."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kvdsl.emit.wgsl import HOST_DATA
from kvdsl.frontend.comments import LineComment
from kvdsl.frontend.errors import UnsupportedError, WgslTypeError
from kvdsl.frontend.numbers import const_int
from kvdsl.frontend.records import Attr, GlobalVar, StructDecl, StructRef
from kvdsl.ir import tree as ir
from kvdsl.ir.types import (
    SCALARS,
    Array,
    Atomic,
    Mat,
    RuntimeArray,
    Scalar,
    HANDLES,
    Struct,
    Vec,
    align_of,
    array_leaf,
    bool_,
    f16,
    f32,
    i32,
    size_of,
    u32,
)

HOST = HOST_DATA[3:]  # the comment's text after '// '


class Interface:
    """The interface a module's declarations give a kernel, each declaration's line entered in
    ``decl_lines`` (by name) as it is taken; ``structs``: the module's structs by name, resolved
    (:meth:`declarations` fills it)."""

    def __init__(
        self, filename: str, comments: dict[int, LineComment], decl_lines: dict[str, int]
    ) -> None:
        self.filename = filename
        self.comments = comments
        self.decl_lines = decl_lines
        self.structs: dict[str, Struct] = {}
        self.uniforms: tuple[ir.Uniform, ...] = ()  # the uniforms other than params
        self.textures: list = []  # the storage textures, by binding number
        self.shared_slots: dict[tuple[int, int], list[str]] = {}  # a slot -> names at it

    def err(self, message: str, line: int | None, column: int | None = None) -> UnsupportedError:
        return UnsupportedError(message, self.filename, line, column)

    def declarations(
        self, structs: list[StructDecl], gvars: list[GlobalVar]
    ) -> tuple[Struct | None, tuple[ir.Binding, ...], tuple[ir.WorkgroupVar, ...]]:
        """The params struct, the bindings and the workgroup vars of ``structs`` and ``gvars``
        (whose struct types are resolved in place), after :attr:`structs` is filled."""
        self.structs = self.struct_types(structs, gvars)
        self.structs.update(self.value_structs(structs, gvars))
        return self.params(structs, gvars), self.bindings(gvars), self.workgroup_vars(gvars)

    def params(self, structs: list[StructDecl], gvars: list[GlobalVar]) -> Struct | None:
        """The struct of the uniform named ``params``, the kernel's params; every other uniform
        (any name, any type a uniform holds) entered in :attr:`uniforms`, by binding number."""
        uniforms = [g for g in gvars if g.space == "uniform"]
        named = {g.ty.name for g in uniforms if isinstance(g.ty, StructRef)}
        held = _held(named, structs)
        decls = {d.name: d for d in structs}
        stray = [d for d in structs if d.name not in held and d.name not in self.structs]
        if stray:
            raise self.err(
                f"struct {stray[0].name} (the uniform params struct, or the element of a storage "
                "or workgroup array)",
                stray[0].line,
            )
        params, others = None, []
        for u in uniforms:
            slot = self.resource_attrs(u)
            if isinstance(u.ty, StructRef) and u.ty.name not in decls:
                raise self.err("a uniform whose type is not the module's struct", u.line, u.column)
            leaf, ty = array_leaf(u.ty), u.ty
            problem = None if isinstance(leaf, StructRef) else _uniform_problem(ty, decls, ())
            if problem is not None:  # Tint's refusals: a bool, an atomic, a runtime-sized array
                raise WgslTypeError(
                    f"uniform '{u.name}': {_spell(ty)} {problem}", self.filename, u.line
                )
            if isinstance(leaf, StructRef):
                st = self.uniform_struct(decls[leaf.name], decls)
                _add_nested(st, self.structs)  # for the typer: let r: Range = params.span;
                ty = _with_leaf(u.ty, st)
                if ty is not st:
                    self.structs[st.name] = st
            self.decl_lines[u.name] = u.line
            if u.name == "params" and isinstance(ty, Struct):
                params = ty
            else:
                others.append((slot, ir.Uniform(u.name, ty)))
                if isinstance(ty, Struct):
                    self.structs[ty.name] = ty
        self.uniforms = tuple(x for _, x in sorted(others, key=lambda x: x[0]))
        return params

    def uniform_struct(self, d: StructDecl, decls: dict[str, StructDecl]) -> Struct:
        """Struct ``d`` of a uniform, the structs its members name resolved."""
        for fname, fty in d.fields:
            problem = (
                None if isinstance(fty, (Scalar, Vec, Mat)) else _uniform_problem(fty, decls, ())
            )
            if problem is not None:  # Tint's refusals (a bool field the verifier refuses)
                raise WgslTypeError(
                    f"params struct {d.name} field {fname}: {_spell(fty)} {problem}",
                    self.filename,
                    d.line,
                )
        fields = []
        for fname, fty in d.fields:  # a struct member resolved: inner: Inner
            leaf = array_leaf(fty)
            if isinstance(leaf, StructRef):
                if leaf.name not in decls or leaf.name == d.name:
                    what = "contains itself" if leaf.name in decls else "names no struct"
                    raise WgslTypeError(
                        f"params struct {d.name} field {fname}: {leaf.name} {what}",
                        self.filename,
                        d.line,
                    )
                st = self.nested_struct(decls[leaf.name], decls, False, (d.name,))
                fty = _with_leaf(fty, st)
            fields.append((fname, fty))
        return Struct(d.name, tuple(fields), self.layout(d, fields))

    def value_structs(self, structs: list[StructDecl], gvars: list[GlobalVar]) -> dict[str, Struct]:
        """The structs no uniform and no storage or workgroup array names: values of function
        scope (``let s = S(a, b);``, ``var s: S;``), by name; their members are u32, i32 or f32
        scalars, vectors of them, or fixed-size arrays of those."""
        named = {g.ty.name for g in gvars if g.space == "uniform" and isinstance(g.ty, StructRef)}
        named = _held(named, structs)  # the uniform's structs are checked by params
        out: dict[str, Struct] = {}
        for d in structs:
            if d.name in named or d.name in self.structs:
                continue
            out[d.name] = self.nested_struct(d, {x.name: x for x in structs}, False, ())
        return out

    def nested_struct(
        self,
        d: StructDecl,
        decls: dict[str, StructDecl],
        memory: bool,
        outer: tuple[str, ...],
        workgroup: bool = False,
    ) -> Struct:
        """Struct ``d`` with the structs its members name resolved, each member checked: u32,
        i32, f32 or f16 scalars, vectors of them, matrices, other structs, fixed-size arrays of
        those; in ``memory`` (storage or workgroup) also ``atomic<u32>`` / ``atomic<i32>``, and
        in ``workgroup`` memory bool. ``outer``: the structs that contain ``d`` (WGSL refuses a
        struct that contains itself)."""
        fields = []
        for fname, fty in d.fields:
            inner = array_leaf(fty)
            if isinstance(inner, StructRef):
                if inner.name in outer or inner.name == d.name:
                    raise WgslTypeError(
                        f"struct {d.name} member {fname}: {inner.name} contains {d.name} "
                        "(WGSL refuses a recursive struct)",
                        self.filename,
                        d.line,
                    )
                sub = decls.get(inner.name)
                if sub is None:
                    raise WgslTypeError(
                        f"struct {d.name} member {fname}: unknown type '{inner.name}'",
                        self.filename,
                        d.line,
                    )
                st = self.nested_struct(sub, decls, memory, (*outer, d.name), workgroup)
                fields.append((fname, _with_leaf(fty, st)))
                continue
            # bool is no host-shareable type: of memory, only a workgroup struct holds one
            numbers = (
                (u32, i32, f32, f16, bool_) if workgroup or not memory else (u32, i32, f32, f16)
            )
            ok = isinstance(inner, (Scalar, Vec)) and inner.scalar in numbers
            ok = ok or isinstance(inner, Mat)
            if ok or memory and isinstance(inner, Atomic) and inner.elem in (u32, i32):
                fields.append((fname, fty))
                continue
            if memory and isinstance(inner, (Scalar, Vec)) and inner.scalar == bool_:
                raise WgslTypeError(  # Tint: "type 'bool' cannot be used in address space"
                    f"struct {d.name} member {fname}: {_spell(fty)} in storage memory (bool "
                    "is not host-shareable; only workgroup memory holds it)",
                    self.filename,
                    d.line,
                )
            where = " in storage or workgroup memory" if memory else ""
            scalars = "u32, i32, f32 or f16"
            atomics = "atomic<u32> or atomic<i32>, " if memory else ""
            raise self.err(
                f"struct {d.name} member {fname}: {_spell(fty)} (members of a struct{where} "
                f"are {scalars} scalars, vectors of them, {atomics}other structs, or "
                "fixed-size arrays of those, nested or not)",
                d.line,
            )
        return Struct(d.name, tuple(fields), self.layout(d, fields))

    def layout(self, d: StructDecl, fields: list) -> tuple[tuple[int | None, int | None], ...]:
        """The ``@align(n)`` and ``@size(n)`` of each member of ``d`` (whose members resolved
        are ``fields``), as :attr:`Struct.layout` holds them; each checked as WGSL checks it: an
        alignment a power of two and a multiple of the member type's, a size at least the
        type's."""
        out = []
        for (fname, fty), attrs in zip(fields, d.attrs):
            got: dict[str, int] = {}
            for a in attrs:
                if a.args is None or len(a.args) != 1 or a.name in got:
                    raise WgslTypeError(
                        f"struct {d.name} member {fname}: @{a.name} takes one argument, once",
                        self.filename,
                        a.line,
                    )
                got[a.name] = n = _int_arg(a, {}, self.filename)
                if a.name == "size" and isinstance(fty, RuntimeArray):
                    raise WgslTypeError(
                        f"struct {d.name} member {fname}: @size on a runtime-sized array "
                        "(WGSL takes @size only on members of a fixed size)",
                        self.filename,
                        a.line,
                    )
                if a.name == "align":
                    least = align_of(fty)
                    if n <= 0 or n & (n - 1) or n % least:
                        raise WgslTypeError(
                            f"struct {d.name} member {fname}: @align({n}) (WGSL takes a power "
                            f"of two that is a multiple of {fty}'s alignment, {least})",
                            self.filename,
                            a.line,
                        )
                elif n < size_of(fty):
                    raise WgslTypeError(
                        f"struct {d.name} member {fname}: @size({n}) (WGSL takes at least "
                        f"{fty}'s size, {size_of(fty)})",
                        self.filename,
                        a.line,
                    )
            out.append((got.get("align"), got.get("size")))
        return tuple(out) if any(a != (None, None) for a in out) else ()

    def struct_types(self, structs: list[StructDecl], gvars: list[GlobalVar]) -> dict[str, Struct]:
        """The structs storage and workgroup arrays hold (``array<BlockQ8>``), by name, their
        array types resolved in ``gvars``; members are 32-bit scalars, vectors of them and
        fixed-size arrays of those."""
        decls = {d.name: d for d in structs}
        out: dict[str, Struct] = {}
        for k, g in enumerate(gvars):
            if g.space not in ("storage", "workgroup"):
                continue
            ty = g.ty
            whole = isinstance(ty, StructRef)  # rows: Rows (storage), or state: S (workgroup)
            if not whole and (
                not isinstance(ty, (Array, RuntimeArray))
                or not isinstance(array_leaf(ty.elem), StructRef)
            ):
                continue  # array<B>, array<B, 4>, array<array<B, 2>> (storage or workgroup)
            ref = ty if whole else array_leaf(ty.elem)
            d = decls.get(ref.name)
            if d is None:
                raise WgslTypeError(
                    f"var '{g.name}': unknown type '{ref.name}'", self.filename, ref.line
                )
            tail = None  # a runtime-sized last member of a binding that is one struct
            for fname, fty in d.fields:
                if isinstance(fty, RuntimeArray) and fname != d.fields[-1][0]:
                    raise WgslTypeError(
                        f"struct {d.name} member {fname}: {_spell(fty)} is runtime-sized but not "
                        "the struct's last member (WGSL takes one only last)",
                        self.filename,
                        d.line,
                    )
                if whole and g.space == "storage" and isinstance(fty, RuntimeArray):
                    tail = (fname, fty)
            sized = [a for a in d.attrs[-1] if a.name == "size"] if d.attrs else []
            if tail is not None and sized:
                raise WgslTypeError(
                    f"struct {d.name} member {tail[0]}: @size on a runtime-sized array (WGSL "
                    "takes @size only on members of a fixed size)",
                    self.filename,
                    sized[0].line,
                )
            body = (
                d if tail is None else replace(d, fields=d.fields[:-1] + ((tail[0], tail[1].elem),))
            )
            st = self.nested_struct(body, decls, True, (), g.space == "workgroup")
            if tail is not None:
                st = replace(
                    st, fields=st.fields[:-1] + ((tail[0], RuntimeArray(st.fields[-1][1])),)
                )
            out[d.name] = st
            _add_nested(st, out)  # the structs it holds, for the typer and value_structs
            if whole:
                gvars[k] = replace(g, ty=st)
                continue
            gvars[k] = replace(g, ty=_with_leaf(ty, st))
        return out

    def resource_attrs(self, g: GlobalVar) -> tuple[int, int]:
        got = {}
        for a in g.attrs:
            if a.name not in ("group", "binding") or a.args is None or len(a.args) != 1:
                raise self.err(f"attribute @{a.name} on a module var", a.line, a.column)
            got[a.name] = value = _int_arg(a, {}, self.filename)
            if not 0 <= value < 2**31:
                raise WgslTypeError(
                    f"@{a.name}({value}) on var '{g.name}': WGSL takes a non-negative i32 "
                    f"(0 to {2**31 - 1})",
                    self.filename,
                    a.line,
                )
        if set(got) != {"group", "binding"}:
            raise self.err(f"var '{g.name}' without @group and @binding", g.line, g.column)
        return got["group"], got["binding"]

    def bindings(self, gvars: list[GlobalVar]) -> tuple[ir.Binding, ...]:
        numbered = []
        seen = {}
        for g in gvars:
            if g.space == "workgroup" or g.space == "private":
                continue
            if g.space == "uniform":
                slot = self.resource_attrs(g)
            elif g.space is None and isinstance(g.ty, HANDLES):
                slot = self.resource_attrs(g)
                if g.has_init:
                    raise WgslTypeError(
                        f"{g.ty} '{g.name}' with an initialiser", self.filename, g.line
                    )
                self.textures.append((slot, ir.Texture(g.name, g.ty)))
                self.decl_lines[g.name] = g.line
            elif g.space != "storage":
                what = f"var<{g.space}>" if g.space else "a module var without address space"
                raise self.err(
                    f"{what} (storage, uniform, workgroup and private only)", g.line, g.column
                )
            else:
                slot = self.resource_attrs(g)
                if g.has_init:
                    raise self.err(f"storage var '{g.name}' with an initialiser", g.line)
                if isinstance(g.ty, (Struct, Array, Mat)):  # one struct, array or matrix
                    access = g.access or "read"
                    if access not in ("read", "read_write"):
                        raise self.err(f"storage access '{access}'", g.line, g.column)
                    b = ir.Binding(g.name, g.ty, access, None, whole=True)
                elif isinstance(
                    g.ty, (Scalar, Vec, Atomic)
                ):  # n: u32, v: vec4<f32>, c: atomic<u32>
                    access = g.access or "read"
                    if access not in ("read", "read_write"):
                        raise self.err(f"storage access '{access}'", g.line, g.column)
                    if g.ty.scalar == bool_:
                        raise WgslTypeError(
                            f"storage var '{g.name}' of type {g.ty}: bool is not host-shareable "
                            "(storage holds u32, i32, f32 and f16 values)",
                            self.filename,
                            g.line,
                        )
                    if isinstance(g.ty, Atomic) and access != "read_write":
                        raise WgslTypeError(
                            f"storage var '{g.name}' of {g.ty} is {access}: atomics in storage "
                            "are read_write",
                            self.filename,
                            g.line,
                        )
                    b = ir.Binding(g.name, g.ty, access, None, whole=True)
                else:
                    if not isinstance(g.ty, RuntimeArray):
                        raise self.err(
                            f"storage var '{g.name}' of type {_spell(g.ty)} (runtime-sized arrays, "
                            "fixed-size arrays, structs, scalars, vectors and atomics)",
                            g.line,
                            g.column,
                        )
                    access = g.access or "read"
                    if access not in ("read", "read_write"):
                        raise self.err(f"storage access '{access}'", g.line, g.column)
                    if isinstance(g.ty.elem, Atomic) and access != "read_write":
                        raise WgslTypeError(
                            f"storage var '{g.name}' of {g.ty} is {access}: atomics in storage are "
                            "read_write",
                            self.filename,
                            g.line,
                        )
                    b = ir.Binding(g.name, g.ty.elem, access, self.host_data(g))
                numbered.append((slot, b))
                self.decl_lines[g.name] = g.line
            if slot in seen:  # one the entry point names is kept (kvdsl.frontend.slots)
                self.shared_slots.setdefault(slot, [seen[slot]]).append(g.name)
            seen.setdefault(slot, g.name)
        self.textures = [t for _, t in sorted(self.textures, key=lambda x: x[0])]
        return tuple(b for _, b in sorted(numbered, key=lambda x: x[0]))

    def host_data(self, g: GlobalVar) -> Scalar | None:
        """The host data type a ``// host: T`` comment ending the binding's line names."""
        c = self.comments.get(g.line)
        if c is None or c.own_line or not c.text.startswith(HOST):
            return None
        name = c.text[len(HOST) :].strip()
        if name not in SCALARS:
            raise self.err(f"'// {HOST}{name}' on binding '{g.name}' (a scalar type)", g.line)
        return SCALARS[name]

    def workgroup_vars(self, gvars: list[GlobalVar]) -> tuple[ir.WorkgroupVar, ...]:
        """The ``var<workgroup>`` declarations, in source order."""
        out = []
        for g in gvars:
            if g.space != "workgroup":
                continue
            if g.attrs:
                a = g.attrs[0]
                raise self.err(f"attribute @{a.name} on workgroup var '{g.name}'", a.line, a.column)
            if g.access is not None:
                raise self.err(f"var<workgroup, {g.access}>", g.line, g.column)
            if g.has_init:
                raise self.err(f"workgroup var '{g.name}' with an initialiser", g.line, g.column)
            if not isinstance(g.ty, (Array, Atomic, Scalar, Vec, Mat, Struct)):
                raise self.err(
                    f"workgroup var '{g.name}' of type {_spell(g.ty)} (fixed-size arrays, "
                    "atomics, scalars, vectors, matrices and structs)",
                    g.line,
                    g.column,
                )
            out.append(ir.WorkgroupVar(g.name, g.ty))
            self.decl_lines[g.name] = g.line
        return tuple(out)


def _held(names: set[str], structs: list[StructDecl]) -> set[str]:
    """``names`` and the names of the structs theirs hold as members, at any depth."""
    decls = {d.name: d for d in structs}
    out, todo = set(names), list(names)
    while todo:
        d = decls.get(todo.pop())
        for _, t in d.fields if d is not None else ():
            leaf = array_leaf(t)
            if isinstance(leaf, StructRef) and leaf.name not in out:
                out.add(leaf.name)
                todo.append(leaf.name)
    return out


def _uniform_problem(ty: Any, decls: dict[str, StructDecl], outer: tuple[str, ...]) -> str | None:
    """Why WGSL refuses ``ty`` in the uniform address space (None: it takes it): a bool
    (not host-shareable), an atomic, a runtime-sized array (no fixed footprint), at any depth
    of structs and fixed-size arrays."""
    while isinstance(ty, Array):
        ty = ty.elem
    if isinstance(ty, RuntimeArray):
        return "is runtime-sized (a uniform has a fixed footprint)"
    if isinstance(ty, Atomic):
        return "holds an atomic (atomics live in storage or workgroup memory)"
    if isinstance(ty, (Scalar, Vec, Mat)) and ty.scalar == bool_:
        return "holds a bool (not host-shareable: the uniform holds u32, i32, f32 and f16)"
    d = decls.get(ty.name) if isinstance(ty, StructRef) and ty.name not in outer else None
    for _, t in d.fields if d is not None else ():
        problem = _uniform_problem(t, decls, (*outer, d.name))
        if problem is not None:
            return problem
    return None


def _spell(ty: Any) -> str:
    return ty.name if isinstance(ty, StructRef) else str(ty)


def _int_arg(a: Attr, consts: dict, filename: str) -> int:
    return const_int(a.args[0], consts, (filename, a.line, a.column))


def _add_nested(st: Struct, out: dict[str, Struct]) -> None:
    """Enter the structs ``st``'s members hold, to any depth, in ``out`` by name."""
    for _, t in st.fields:
        t = array_leaf(t.elem if isinstance(t, RuntimeArray) else t)
        if isinstance(t, Struct) and t.name not in out:
            out[t.name] = t
            _add_nested(t, out)


def _with_leaf(ty, st: Struct):
    """``ty``, an array (nested or not) of a struct named, holding ``st`` instead."""
    if isinstance(ty, Array):
        return Array(_with_leaf(ty.elem, st), ty.n)
    if isinstance(ty, RuntimeArray):
        return RuntimeArray(_with_leaf(ty.elem, st))
    return st
