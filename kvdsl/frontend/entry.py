"""An entry point's and helper functions' attributes, checked as WGSL checks them: the
workgroup size, the builtin inputs (as parameters or members of a struct parameter), and
``@must_use`` / ``@diagnostic``."""

from __future__ import annotations

from typing import Any

from kvdsl.frontend.errors import WgslTypeError
from kvdsl.frontend.numbers import const_int
from kvdsl.frontend.records import Attr, FnDecl, RawLet, RawLit, StructRef
from kvdsl.ir import tree as ir
from kvdsl.ir.scope import Scope, Symbol, VerifyError, name_problem
from kvdsl.ir.ops import Op
from kvdsl.ir.types import Struct, u32

#: WGSL's builtin values that are no compute shader input (Tint: "'@builtin(position)' cannot be
#: used for compute shader input").
_NOT_COMPUTE_INPUTS = (
    "barycentric_coord", "clip_distances", "frag_depth", "front_facing", "instance_index",
    "position", "primitive_index", "sample_index", "sample_mask", "vertex_index", "view_index",
)  # fmt: skip
#: Compute inputs naga does not know, each a ``let`` at the top of the entry point's body, of
#: WGSL's definition over the builtins the IR has (:meth:`EntryPoint.derived_lets`).
DERIVED_INPUTS = ("workgroup_index", "global_invocation_index")

#: WGSL's language features a ``requires`` directive may name (the specification's list).
LANGUAGE_FEATURES = frozenset(
    (
        "readonly_and_readwrite_storage_textures",
        "packed_4x8_integer_dot_product",
        "unrestricted_pointer_parameters",
        "pointer_composite_access",
        "uniform_buffer_standard_layout",
        "subgroup_id",
        "subgroup_uniformity",
        "texel_buffers",
    )
)
SEVERITIES = ("error", "warning", "info", "off")
#: WGSL's extensions of the vertex and fragment stages (``@builtin(clip_distances)``,
#: ``@blend_src``, ``@builtin(primitive_index)``): a compute module may enable one, using nothing
#: it grants. WGSL takes the directive where the device has the extension's feature, so the
#: kernel keeps it (a directive of ``Kernel.directives``) and its device is asked for that
#: feature (:mod:`kvdsl.runtime.device`).
STAGE_EXTENSIONS = ("clip_distances", "dual_source_blending", "primitive_index")
#: The extensions Tint knows past WGSL's: Dawn allows each only under a device feature or a
#: toggle that WebGPU's devices (and kvdsl's) are not given.
TINT_EXTENSIONS = frozenset(
    (
        "atomic_vec2u_min_max",
        "subgroup_size_control",
        "view_instancing",
        "chromium_disable_uniformity_analysis",
        "chromium_experimental_barycentric_coord",
        "chromium_experimental_framebuffer_fetch",
        "chromium_experimental_pixel_local",
        "chromium_experimental_resource_table",
        "chromium_experimental_subgroup_matrix",
        "chromium_internal_input_attachments",
    )
)


class EntryPoint:
    """The entry point's and helpers' attributes (``@workgroup_size``, ``@builtin`` inputs,
    ``@must_use``, ``@diagnostic``) and the names they declare, for the module's assembler
    (:class:`kvdsl.frontend.parser._Assembler`)."""

    def enabled(self) -> tuple[set[str], tuple[str, ...]]:
        """The module's ``enable`` directives, each checked as Tint checks it on a device of the
        features kvdsl asks for: the extensions of ``f16`` and ``subgroups`` it names (which
        the printer writes back where the kernel uses them), and the directives of
        :data:`STAGE_EXTENSIONS` it names, each once (``enable clip_distances``)."""
        named, kept = set(), []
        for ext, line, column in self.module.enables:
            if ext in TINT_EXTENSIONS:
                raise WgslTypeError(
                    f"extension '{ext}' is not allowed in the current environment (an extension "
                    "of Tint's, not WGSL's: Dawn allows it under a device feature or toggle that "
                    "kvdsl does not ask for)",
                    self.filename,
                    line,
                    column,
                )
            if ext not in ("f16", "subgroups", *STAGE_EXTENSIONS):
                raise WgslTypeError(
                    f"enable {ext}: expected extension (WGSL's are f16, subgroups, "
                    f"{', '.join(STAGE_EXTENSIONS)})",
                    self.filename,
                    line,
                    column,
                )
            if ext in STAGE_EXTENSIONS and f"enable {ext}" not in kept:
                kept.append(f"enable {ext}")
            named.add(ext)
        return named, tuple(kept)

    def workgroup_size(self, entry: FnDecl, consts: tuple[ir.Const, ...]):
        values = dict(self.folded)  # those of const-expressions: T = Tile(N, N * 2u)
        values.update({c.name: c.value.value for c in consts if hasattr(c.value, "value")})
        for c in consts:  # a struct const's integer members: @workgroup_size(T.rows)
            if isinstance(c.ty, Struct) and isinstance(c.value, ir.Construct):
                values[c.name] = values.get(c.name, {}) | {
                    n: a.value
                    for (n, _), a in zip(c.ty.fields, c.value.args)
                    if isinstance(a, ir.Lit) and type(a.value) is int
                }
        for a in entry.attrs:
            if a.name == "diagnostic":
                self.diagnostic_attr(a, entry)
        found = None
        for a in entry.attrs:
            if a.name == "diagnostic":
                continue
            if a.name == "compute":
                if a.args is not None:
                    raise WgslTypeError(
                        "@compute takes no arguments", self.filename, a.line, a.column
                    )
            elif a.name == "workgroup_size" and found is None:
                if not a.args or len(a.args) > 3:
                    n = len(a.args or ())
                    raise WgslTypeError(
                        f"@workgroup_size takes 1 to 3 arguments, got {n}",
                        self.filename,
                        a.line,
                        a.column,
                    )
                size = [const_int(e, values, (self.filename, a.line, a.column)) for e in a.args]
                kinds = {t for e in a.args for t in _literal_types(e, consts)}
                if len(kinds) > 1:
                    raise WgslTypeError(
                        f"@workgroup_size arguments of different types ({', '.join(sorted(kinds))}):"
                        " WGSL takes all i32 or all u32",
                        self.filename,
                        a.line,
                    )
                size += [1] * (3 - len(size))
                first = a.args[0]
                found = tuple(size), first.name if isinstance(first, ir.Name) else None
            else:
                raise WgslTypeError(
                    f"attribute @{a.name} on the entry point (a compute entry point takes "
                    "@compute, @workgroup_size and @diagnostic, each once)",
                    self.filename,
                    a.line,
                    a.column,
                )
        if found is None:
            raise WgslTypeError(
                "@compute without @workgroup_size: a compute shader must include "
                "'@workgroup_size' in its attributes",
                self.filename,
                entry.line,
            )
        return found

    def builtins(
        self, entry: FnDecl, main: Scope, size: tuple[int, int, int]
    ) -> tuple[tuple[tuple[str, str], ...], tuple[RawLet, ...]]:
        """The entry point's builtins, ``(parameter, builtin)``, and the statements that open
        its body: a parameter of a struct whose members are builtins is a builtin per member
        (named after the parameter and the member) and a ``let`` of the struct built from them,
        which the body reads as WGSL reads the parameter; a builtin of :data:`DERIVED_INPUTS`
        is a ``let`` (:meth:`derived_lets`; ``size`` the workgroup size)."""
        if entry.ret is not None:
            raise WgslTypeError(
                "an entry point with a return type (a compute entry point returns nothing)",
                self.filename,
                entry.line,
            )
        out: list[tuple[str, str]] = []
        prelude = []
        for attrs, pname, pty in entry.params:
            members = self.member_builtins.get(pty.name) if isinstance(pty, StructRef) else None
            if not attrs and members is not None:
                st = self.interface_structs.get(pty.name)
                missing = [m for m, _ in st.fields if m not in members] if st else []
                if missing:
                    raise WgslTypeError(
                        f"entry point parameter '{pname}': member {missing[0]} of {pty.name} "
                        "has no @builtin (a compute entry point's inputs are builtins)",
                        self.filename,
                        entry.line,
                    )
                args = []
                for m, mty in st.fields:
                    name = f"{pname}_{m}"
                    while name in self.words or any(name == p for p, _ in out):
                        name += "_"
                    self._builtin(entry, name, members[m], mty, out, f"{pty.name} member {m}")
                    what = f"parameter {pname}"
                    if out[-1][1] not in DERIVED_INPUTS:
                        sym = Symbol(mty, "builtin")
                        self._declare(main, name, sym, entry, what, entry.line)
                    args.append(ir.Name(name))
                prelude.append(RawLet(pname, None, ir.FnCall(pty.name, tuple(args))))
                continue
            if len(attrs) != 1 or attrs[0].name != "builtin" or attrs[0].args is None:
                raise WgslTypeError(
                    f"entry point parameter '{pname}' without @builtin (a compute entry "
                    "point's inputs are builtins)",
                    self.filename,
                    entry.line,
                )
            self._builtin(entry, pname, attrs[0], pty, out, f"builtin '{pname}'")
            if out[-1][1] in DERIVED_INPUTS:
                continue
            want = ir.builtin_type(out[-1][1])
            self._declare(
                main, pname, Symbol(want, "builtin"), entry, f"parameter {pname}", entry.line
            )
        self.derived_inputs = {p: b for p, b in out if b in DERIVED_INPUTS}
        if self.derived_inputs:
            out = [(p, b) for p, b in out if b not in DERIVED_INPUTS]
            prelude = self.derived_lets(entry, main, size, out) + prelude
        return tuple(out), tuple(prelude)

    def derived_lets(
        self, entry: FnDecl, main: Scope, size: tuple[int, int, int], out: list
    ) -> list[RawLet]:
        """A ``let`` of each builtin of :data:`DERIVED_INPUTS`, as WGSL defines it: the
        ``workgroup_index`` is ``wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y`` and the
        ``global_invocation_index`` that times the workgroup's size, plus the
        ``local_invocation_index``; ``workgroup_id``, ``num_workgroups`` and
        ``local_invocation_index`` appended to ``out`` (named as the IR's builder names them,
        past every word of the module) where the entry point does not take them."""
        names = {b: p for p, b in out}

        def read(builtin: str) -> ir.Name:
            if builtin not in names:
                name = ir.BUILTIN_INPUTS[builtin]
                while name in self.words or any(name == p for p, _ in out):
                    name += "_"
                out.append((name, builtin))
                sym = Symbol(ir.builtin_type(builtin), "builtin")
                self._declare(main, name, sym, entry, f"parameter {name}", entry.line)
                names[builtin] = name
            return ir.Name(names[builtin])

        def at(builtin: str, comp: str) -> ir.Member:
            return ir.Member(read(builtin), comp)

        lets = []
        for pname, builtin in self.derived_inputs.items():
            wid, nwg = "workgroup_id", "num_workgroups"
            index = ir.Binary(
                Op.ADD,
                ir.Binary(Op.ADD, at(wid, "x"), ir.Binary(Op.MUL, at(wid, "y"), at(nwg, "x"))),
                ir.Binary(Op.MUL, ir.Binary(Op.MUL, at(wid, "z"), at(nwg, "x")), at(nwg, "y")),
            )
            if builtin == "global_invocation_index":
                total = RawLit(size[0] * size[1] * size[2], u32)
                index = ir.Binary(
                    Op.ADD,
                    ir.Binary(Op.MUL, index, total),
                    read("local_invocation_index"),
                )
            lets.append(RawLet(pname, None, index))
        return lets

    def _builtin(
        self, entry: FnDecl, pname: str, attr: Attr, pty: Any, out: list, what: str
    ) -> None:
        """``(pname, builtin)`` appended to ``out``, ``attr`` (``@builtin(name)``) and the type
        ``pty`` checked as WGSL checks them."""
        arg = attr.args
        value = arg[0].name if arg and len(arg) == 1 and isinstance(arg[0], ir.Name) else None
        known = (*ir.BUILTIN_INPUTS, *DERIVED_INPUTS)
        if value in _NOT_COMPUTE_INPUTS:
            raise WgslTypeError(
                f"'@builtin({value})' of '{pname}' cannot be used for compute shader input (a "
                f"compute entry point's builtins are {', '.join(known)})",
                self.filename,
                attr.line,
                attr.column,
            )
        if value not in known:
            raise WgslTypeError(
                f"@builtin of '{pname}': expected builtin value name (a compute entry point's "
                f"builtins are {', '.join(known)})",
                self.filename,
                attr.line,
                attr.column,
            )
        want = u32 if value in DERIVED_INPUTS else ir.builtin_type(value)
        if pty != want:
            raise WgslTypeError(
                f"{what} of type {pty}: @builtin({arg[0].name}) is {want}",
                self.filename,
                attr.line,
            )
        twice = [p for p, b in out if b == arg[0].name]
        if twice:
            raise WgslTypeError(
                f"@builtin({arg[0].name}) on '{twice[0]}' and '{pname}': WGSL takes each "
                "builtin once",
                self.filename,
                attr.line,
            )
        out.append((pname, arg[0].name))

    def _declare(
        self,
        scope: Scope,
        name: str,
        sym: Symbol,
        node: Any,
        what: str,
        line: int | None,
        local: bool = False,
    ) -> None:
        """``scope.declare``, a name no declaration may take, or one declared twice, a located
        error (``local``: a function-scope declaration, kvdsl.ir.scope.name_problem's)."""
        problem = name_problem(name, local=local)
        if problem is not None:
            raise WgslTypeError(f"{what}: {problem}", self.filename, line)
        try:
            scope.declare(name, sym, node, local)
        except VerifyError:
            raise WgslTypeError(f"{what} is already declared", self.filename, line) from None

    def helper_attrs(self, fn: FnDecl) -> None:
        """A helper's attributes, as Tint checks them: ``@must_use`` (a function returning a
        value) and ``@diagnostic(severity, rule)``; neither changes what the function does."""
        for a in fn.attrs:
            if a.name == "must_use":
                if a.args is not None:
                    raise WgslTypeError(
                        f"@must_use on {fn.name} takes no arguments", self.filename, a.line
                    )
                if fn.ret is None:
                    raise WgslTypeError(
                        f"@must_use on {fn.name}: the function returns no value (@must_use is "
                        "for a function with a return type)",
                        self.filename,
                        a.line,
                    )
            elif a.name == "diagnostic":
                self.diagnostic_attr(a, fn)
            else:
                raise WgslTypeError(
                    f"attribute @{a.name} on helper function {fn.name} (a helper takes "
                    "@must_use and @diagnostic)",
                    self.filename,
                    a.line,
                    a.column,
                )
        names = [a.name for a in fn.attrs]
        if names.count("must_use") > 1:
            raise WgslTypeError(
                f"@must_use twice on {fn.name}: WGSL takes an attribute once",
                self.filename,
                fn.line,
            )
        if "must_use" in names:
            self.must_use.add(fn.name)

    def diagnostic_attr(self, a: Attr, fn: FnDecl) -> None:
        """``@diagnostic(severity, rule)`` on function ``fn``, checked as Tint checks it (it
        changes no value: kvdsl keeps no diagnostics)."""
        severity = a.args[0] if a.args else None
        if (
            a.args is None
            or len(a.args) != 2
            or not isinstance(severity, ir.Name)
            or not isinstance(a.args[1], (ir.Name, ir.Member))
        ):
            raise WgslTypeError(
                f"@diagnostic on {fn.name} takes a severity and a rule name "
                "(@diagnostic(off, derivative_uniformity))",
                self.filename,
                a.line,
            )
        if severity.name not in SEVERITIES:
            raise WgslTypeError(
                f"@diagnostic({severity.name}, ...) on {fn.name}: the severity is one of "
                f"{', '.join(SEVERITIES)}",
                self.filename,
                a.line,
            )


def _literal_types(e: ir.Expr, consts: tuple[ir.Const, ...]) -> set[str]:
    """The concrete integer types ``e``'s suffixed literals and const names carry (an abstract
    literal carries none)."""
    typed = {c.name: c.ty for c in consts}
    out = set()
    for node in ir.walk(e):
        if type(node) is RawLit and node.ty is not None:
            out.add(str(node.ty))
        elif (
            type(node) is ir.Name
            and node.name in typed
            and not isinstance(typed[node.name], Struct)
        ):
            out.add(str(typed[node.name]))
        elif type(node) is ir.Member and type(node.base) is ir.Name:
            st = typed.get(node.base.name)  # a struct const's member: its member's type
            if isinstance(st, Struct) and st.field(node.name) is not None:
                out.add(str(st.field(node.name)))
    return out
