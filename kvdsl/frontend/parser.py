"""``parse(text) -> Kernel``: WGSL in the subset of ``wgsl.lark`` (package data) back into the IR.

Three passes: lark's LALR parser (errors become :class:`WgslSyntaxError` at the token), the
:class:`~kvdsl.frontend.transform.ToIR` transformer (rule by rule to raw IR, rejecting constructs
outside the subset where they stand), and the :class:`~kvdsl.frontend.typer.Typer` (abstract
literals typed by context, every statement checked with its line). The module's declarations
become the kernel's interface: storage bindings in binding-number order, the uniform's struct as
params, consts with the ``//`` lines directly above them as comments, helper functions, the
``@compute`` entry point's workgroup size, builtins and body, and the ``//`` lines directly above
``@compute`` as ``doc``. Finally :func:`~kvdsl.ir.verify.verify` runs on the result.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any

from lark import Lark, Token
from lark.exceptions import UnexpectedInput, VisitError

from kvdsl.frontend import comments as comments_
from kvdsl.frontend.depth import check_depth
from kvdsl.frontend.errors import (
    FrontendError,
    UnsupportedError,
    WgslSyntaxError,
    WgslTypeError,
    check_template_lists,
    check_words,
    position,
    syntax_error,
    template_lists,
)
from kvdsl.frontend.transform import (
    Attr,
    ModuleAssert,
    ConstDecl,
    FnDecl,
    GlobalVar,
    Module,
    RawLit,
    StructDecl,
    StructRef,
    ToIR,
    const_int,
)
from kvdsl.frontend.typer import Typer
from kvdsl.emit.wgsl import HOST_DATA
from kvdsl.ir import tree as ir
from kvdsl.ir.types import (
    SCALARS,
    Array,
    Atomic,
    Ptr,
    RuntimeArray,
    Scalar,
    Mat,
    Struct,
    Vec,
    array_leaf,
    bool_,
    f16,
    f32,
    i32,
    u32,
)
from kvdsl.ir.features import uses_f16
from kvdsl.ir.scope import Scope, Symbol, VerifyError, name_problem
from kvdsl.ir.verify import Verifier, check_pointer_type, module_scope, value_struct, verify

HOST = HOST_DATA[3:]  # the comment's text after '// '


def grammar() -> str:
    """The text of ``wgsl.lark``, the grammar of the accepted subset (package data)."""
    return resources.files("kvdsl.frontend").joinpath("wgsl.lark").read_text(encoding="utf-8")


class _WholeWords:
    """Lark's contextual lexer offers in each parser state only the terminals that state
    accepts; where a name cannot stand (between module declarations, say) it matched a keyword
    at the start of a longer word, so ``constHALF: u32 = 16u;`` read as ``const HALF``, which
    WGSL refuses. Offered ``NAME`` everywhere (a post-lexer's ``always_accept``), the lexer takes
    the whole word, a keyword only where the word is one, and the parser refuses the name.
    ``++`` and ``--`` likewise: WGSL tokenises ``a--b`` as ``a -- b`` and refuses it, where the
    contextual lexer read ``a - -b``."""

    always_accept = ("NAME", "_INCREMENT", "_DECREMENT")
    #: Offsets of the ``>`` that close template lists in the text being parsed (WGSL's
    #: template-list discovery): a ``>>`` token starting at one is two closers
    #: (``ptr<function, array<f32, 4>>``), where an expression's state offered the shift.
    closers: frozenset[int] = frozenset()

    def process(self, stream):
        for tok in stream:
            if tok.value == ">>" and tok.start_pos in self.closers:
                for k in (0, 1):
                    yield Token(
                        "MORETHAN",
                        ">",
                        start_pos=tok.start_pos + k,
                        line=tok.line,
                        column=tok.column + k,
                        end_line=tok.line,
                        end_column=tok.column + k + 1,
                        end_pos=tok.start_pos + k + 1,
                    )
            else:
                yield tok


@functools.cache
def wgsl_parser() -> Lark:
    """The LALR parser of :func:`grammar` (built once per process)."""
    return Lark(
        grammar(),
        parser="lalr",
        strict=True,
        propagate_positions=True,
        maybe_placeholders=True,
        postlex=_WholeWords(),
    )


def parse(
    text: str,
    filename: str = "<wgsl>",
    dispatch: ir.Dispatch | None = None,
    constants: dict[str, int | float | bool | str] | None = None,
) -> ir.Kernel:
    """The verified kernel written in ``text``; raises a :class:`FrontendError` subclass.

    The kernel is named after ``filename``'s stem ("main" for a pseudo-name like ``<wgsl>``);
    ``dispatch`` is attached as given (WGSL text does not carry it). ``constants`` gives the
    ``override`` declarations their values, by name or ``@id`` (as a pipeline's constants do);
    each override becomes the module ``const`` of its value, or of its initialiser where none
    is given.
    """
    return parse_with_lines(text, filename, dispatch, constants=constants)[0]


def parse_with_lines(
    text: str,
    filename: str = "<wgsl>",
    dispatch: ir.Dispatch | None = None,
    rounded: list[tuple[int | None, str]] | None = None,
    constants: dict[str, int | float | bool | str] | None = None,
) -> tuple[ir.Kernel, dict[int, int]]:
    """Like :func:`parse`, also returning ``{id(stmt): source line}`` for every statement.
    ``rounded``, where given, receives ``(line, literal)`` for each f16 literal whose digits
    are not an f16 value (:data:`kvdsl.ir.portability.ROUNDED_F16` says why that matters)."""
    text = comments_.one_line_break(text)  # a lone "\r" or U+2028 ends a line too
    try:
        found, code = comments_.scan(text)
    except comments_.UnterminatedComment as err:
        line, column = position(text, err.offset)
        raise WgslSyntaxError(
            "a block comment that never closes ('/*' and '*/' nest, as in WGSL)",
            filename,
            line,
            column,
            "/*",
            (),
        ) from None
    check_depth(code, filename)
    check_words(code, filename)
    check_template_lists(code, filename)
    parser = wgsl_parser()
    _WholeWords.closers = frozenset(gt for _, _, gt in template_lists(code))
    try:
        # The comments blanked: the grammar's comment terminals cannot nest block comments.
        tree = parser.parse(code)
    except UnexpectedInput as err:
        raise syntax_error(err, parser, text, filename) from None
    to_ir = ToIR(filename, found, dict(constants or {}))
    try:
        module = to_ir.transform(tree)
    except VisitError as err:
        if isinstance(err.orig_exc, FrontendError):
            raise err.orig_exc from None
        raise
    unused = sorted(str(k) for k in to_ir.constants if k not in to_ir.overridden)
    if unused:
        names = ", ".join(sorted(to_ir.overridden_names)) or "none"
        raise WgslTypeError(
            f"constants: no override named {', '.join(unused)} (the module's: {names})",
            filename,
            None,
        )
    return _Assembler(module, filename, found, to_ir, rounded).kernel(_name(filename), dispatch)


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


def _name(filename: str) -> str:
    if filename.startswith("<"):
        return "main"
    return Path(filename).stem or "main"


class _Assembler:
    """Builds the kernel's interface from module declarations, then types the bodies."""

    def __init__(
        self,
        module: Module,
        filename: str,
        found: list,
        to_ir: ToIR,
        rounded: list[tuple[int | None, str]] | None = None,
    ) -> None:
        self.module = module
        self.rounded = rounded
        self.filename = filename
        self.comments = {c.line: c for c in found}
        self.raw_lines = to_ir.lines
        self.calls = to_ir.calls
        self.decl_lines: dict[str, int] = {}

    def err(self, message: str, line: int | None, column: int | None = None) -> UnsupportedError:
        return UnsupportedError(message, self.filename, line, column)

    def kernel(self, name: str, dispatch: ir.Dispatch | None) -> tuple[ir.Kernel, dict[int, int]]:
        enabled = set()
        for ext, line, column in self.module.enables:
            if ext not in ("f16", "subgroups"):
                raise self.err(f"enable {ext} (only f16 and subgroups)", line, column)
            enabled.add(ext)
        structs = [d for d in self.module.decls if isinstance(d, StructDecl)]
        gvars = [d for d in self.module.decls if isinstance(d, GlobalVar)]
        fns = [d for d in self.module.decls if isinstance(d, FnDecl)]
        entries = [f for f in fns if any(a.name == "compute" for a in f.attrs)]
        if len(entries) != 1:
            line = entries[1].line if entries else None
            raise self.err(
                f"a module with {len(entries)} @compute entry points (kvdsl takes exactly one)",
                line,
            )
        (entry,) = entries
        problem = name_problem(entry.name)  # kvdsl emits "main", but WGSL reads this one
        if problem is not None:
            raise WgslTypeError(f"entry point {entry.name}: {problem}", self.filename, entry.line)
        self.structs = self.struct_types(structs, gvars)
        self.structs.update(self.value_structs(structs, gvars))
        params = self.params(structs, gvars)
        bindings = self.bindings(gvars)
        shared = self.workgroup_vars(gvars)
        probe = ir.Kernel(name, bindings, params, (), (), (1, 1, 1), (), (), workgroup_vars=shared)
        checker = Verifier(probe)
        checker.function_names = frozenset(fn.name for fn in fns if fn is not entry)
        typer = Typer(checker, self.filename, self.raw_lines, self.calls, self.rounded)
        typer.structs = self.structs
        consts = self.consts(typer)
        wg, wg_name = self.workgroup_size(entry, consts)
        probe = replace(probe, consts=consts)
        scope = self.scope(probe, checker, typer)
        functions = []
        for fn in fns:
            if fn is not entry:
                functions.append(self.function(fn, scope, typer))
        asserts = []
        for a in self.module.decls:
            if isinstance(a, ModuleAssert):
                typer.line = a.line
                cond = typer.expr(a.cond, scope, bool_)
                try:
                    checker.const_assert(cond, scope)
                except VerifyError as err:
                    raise WgslTypeError(str(err), self.filename, a.line) from None
                asserts.append(cond)
        directives = self.directives()
        main = Scope(scope)
        builtins = self.builtins(entry, main)
        typer.line = entry.line
        body = typer.block(entry.body, main, None, False)
        kernel = ir.Kernel(
            name=name,
            bindings=bindings,
            params=params,
            consts=consts,
            functions=tuple(functions),
            workgroup_size=wg,
            builtins=builtins,
            body=body,
            dispatch=dispatch,
            doc=tuple(comments_.run_above(self.comments, entry.line)),
            workgroup_size_name=wg_name,
            workgroup_vars=shared,
            directives=directives,
            asserts=tuple(asserts),
        )
        if uses_f16(kernel) and "f16" not in enabled:
            raise WgslTypeError("f16 is used without 'enable f16;'", self.filename, 1)
        # A subgroup builtin is taken with or without 'enable subgroups;': naga (wgpu) refuses
        # the directive and takes the builtins under the adapter's subgroup feature.
        try:
            verify(kernel, house=False)  # kvdsl's rules for its catalog: notes (house_notes)
        except VerifyError as err:
            line = typer.lines.get(id(err.node)) if err.node is not None else None
            if line is None:
                line = self._line_of(str(err), entry)
            raise WgslTypeError(str(err), self.filename, line) from None
        return kernel, typer.lines

    def directives(self) -> tuple[str, ...]:
        """The ``requires`` and ``diagnostic`` directives, each checked as Tint checks it."""
        out = []
        for d in self.module.directives:
            if d.text.startswith("requires"):
                for word in d.words:
                    if word not in LANGUAGE_FEATURES:
                        raise WgslTypeError(
                            f"requires {word}: not a WGSL language feature (one of "
                            f"{', '.join(sorted(LANGUAGE_FEATURES))})",
                            self.filename,
                            d.line,
                        )
            elif d.words[0] not in SEVERITIES:
                raise WgslTypeError(
                    f"diagnostic({d.words[0]}, ...): the severity is one of "
                    f"{', '.join(SEVERITIES)}",
                    self.filename,
                    d.line,
                )
            out.append(d.text)
        return tuple(out)

    def _line_of(self, message: str, entry: FnDecl | None) -> int | None:
        """The line of the declaration ``message`` names, else the entry point's (None when the
        module scope, checked before the entry point is known, names none)."""
        for name, line in self.decl_lines.items():
            if f"'{name}'" in message or f"const {name}:" in message:
                return line
        if message.startswith("params field") and "params" in self.decl_lines:
            return self.decl_lines["params"]  # the uniform's declaration
        return entry.line if entry is not None else None

    # -- interface --
    def params(self, structs: list[StructDecl], gvars: list[GlobalVar]) -> Struct | None:
        uniforms = [g for g in gvars if g.space == "uniform"]
        if len(uniforms) > 1:
            raise self.err("more than one uniform (the IR has one params struct)", uniforms[1].line)
        named = {g.ty.name for g in uniforms if isinstance(g.ty, StructRef)}
        held = _held(named, structs)
        structs = [d for d in structs if d.name in named] + [
            d for d in structs if d.name not in held and d.name not in self.structs
        ]
        if len(structs) > 1 or (structs and not uniforms):
            extra = structs[1] if len(structs) > 1 else structs[0]
            raise self.err(
                f"struct {extra.name} (the uniform params struct, or the element of a storage "
                "or workgroup array)",
                extra.line,
            )
        if not uniforms:
            return None
        u = uniforms[0]
        self.resource_attrs(u)
        if u.name != "params":
            raise self.err(
                f"uniform '{u.name}' (the IR names its uniform 'params')", u.line, u.column
            )
        if not isinstance(u.ty, StructRef) or not structs or structs[0].name != u.ty.name:
            raise self.err("a uniform whose type is not the module's struct", u.line, u.column)
        decls = {d.name: d for d in self.module.decls if isinstance(d, StructDecl)}
        for fname, fty in structs[0].fields:
            problem = (
                None if isinstance(fty, (Scalar, Vec, Mat)) else _uniform_problem(fty, decls, ())
            )
            if problem is not None:  # Tint's refusals (a bool field the verifier refuses)
                raise WgslTypeError(
                    f"params struct {structs[0].name} field {fname}: {_spell(fty)} {problem}",
                    self.filename,
                    structs[0].line,
                )
        self.decl_lines["params"] = u.line
        fields = []
        for fname, fty in structs[0].fields:  # a struct member resolved: inner: Inner
            leaf = array_leaf(fty)
            if isinstance(leaf, StructRef):
                if leaf.name not in decls or leaf.name == structs[0].name:
                    what = "contains itself" if leaf.name in decls else "names no struct"
                    raise WgslTypeError(
                        f"params struct {structs[0].name} field {fname}: {leaf.name} {what}",
                        self.filename,
                        structs[0].line,
                    )
                st = self.nested_struct(decls[leaf.name], decls, False, (structs[0].name,))
                fty = _with_leaf(fty, st)
            fields.append((fname, fty))
        params = Struct(structs[0].name, tuple(fields))
        _add_nested(params, self.structs)  # for the typer: let r: Range = params.span;
        return params

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
            numbers = (u32, i32, f32, f16, bool_) if workgroup else (u32, i32, f32, f16)
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
        return Struct(d.name, tuple(fields))

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
            whole = g.space == "storage" and isinstance(ty, StructRef)  # rows: Rows
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
                if whole and isinstance(fty, RuntimeArray):
                    tail = (fname, fty)
            body = (
                d if tail is None else replace(d, fields=d.fields[:-1] + ((tail[0], tail[1].elem),))
            )
            st = self.nested_struct(body, decls, True, (), g.space == "workgroup")
            if tail is not None:
                st = Struct(st.name, st.fields[:-1] + ((tail[0], RuntimeArray(st.fields[-1][1])),))
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
            if g.space == "workgroup":
                continue
            if g.space == "uniform":
                slot = self.resource_attrs(g)
            elif g.space != "storage":
                what = f"var<{g.space}>" if g.space else "a module var without address space"
                raise self.err(f"{what} (storage, uniform and workgroup only)", g.line, g.column)
            else:
                slot = self.resource_attrs(g)
                if g.has_init:
                    raise self.err(f"storage var '{g.name}' with an initialiser", g.line)
                if isinstance(g.ty, (Struct, Array, Mat)):  # one struct, array or matrix
                    access = g.access or "read"
                    if access not in ("read", "read_write"):
                        raise self.err(f"storage access '{access}'", g.line, g.column)
                    b = ir.Binding(g.name, g.ty, access, None, whole=True)
                    numbered.append((slot, b))
                    self.decl_lines[g.name] = g.line
                    if slot in seen:
                        raise self.err(
                            f"'{g.name}' reuses @group({slot[0]}) @binding({slot[1]})", g.line
                        )
                    seen[slot] = g.name
                    continue
                if isinstance(g.ty, (Scalar, Vec, Atomic)):  # n: u32, v: vec4<f32>, c: atomic<u32>
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
                    numbered.append((slot, ir.Binding(g.name, g.ty, access, None, whole=True)))
                    self.decl_lines[g.name] = g.line
                    if slot in seen:
                        raise self.err(
                            f"'{g.name}' reuses @group({slot[0]}) @binding({slot[1]})", g.line
                        )
                    seen[slot] = g.name
                    continue
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
                data = self.host_data(g)
                numbered.append((slot, ir.Binding(g.name, g.ty.elem, access, data)))
                self.decl_lines[g.name] = g.line
            if slot in seen:
                raise self.err(f"'{g.name}' reuses @group({slot[0]}) @binding({slot[1]})", g.line)
            seen[slot] = g.name
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
            if not isinstance(g.ty, (Array, Atomic)):
                raise self.err(
                    f"workgroup var '{g.name}' of type {g.ty} (only fixed-size arrays and atomics)",
                    g.line,
                    g.column,
                )
            out.append(ir.WorkgroupVar(g.name, g.ty))
            self.decl_lines[g.name] = g.line
        return tuple(out)

    def consts(self, typer: Typer) -> tuple[ir.Const, ...]:
        scope = Scope()
        out = []
        for d in self.module.decls:
            if not isinstance(d, ConstDecl):
                continue
            typer.line = d.line
            declared = None if d.ty is None else typer.resolve(d.ty)  # const C: S = S(...)
            if declared is not None and not isinstance(declared, (Scalar, Vec, Mat, Array, Struct)):
                raise self.err(
                    f"const {d.name}: {d.ty} (module consts are scalars, vectors, matrices, "
                    "arrays and structs)",
                    d.line,
                )
            value = typer.expr(d.value, scope, declared)
            ty = declared or typer.type_of(value, scope)
            if typer.type_of(value, scope) != ty:
                raise typer.error(
                    f"const {d.name}: {ty} is initialised with a {typer.type_of(value, scope)}"
                )
            if not isinstance(ty, (Scalar, Vec, Mat, Array, Struct)):
                raise self.err(
                    f"const {d.name} of type {ty} (module consts are scalars, vectors, "
                    "matrices, arrays and structs)",
                    d.line,
                )
            self._declare(scope, d.name, Symbol(ty, "const"), d, f"const {d.name}", d.line)
            self.decl_lines[d.name] = d.line
            comment = "\n".join(comments_.run_above(self.comments, d.line))
            out.append(ir.Const(d.name, ty, value, comment))
        return tuple(out)

    def scope(self, probe: ir.Kernel, checker: Verifier, typer: Typer) -> Scope:
        try:
            return module_scope(probe, checker)
        except VerifyError as err:
            raise WgslTypeError(str(err), self.filename, self._line_of(str(err), None)) from None

    def workgroup_size(self, entry: FnDecl, consts: tuple[ir.Const, ...]):
        values = {c.name: c.value.value for c in consts if hasattr(c.value, "value")}
        for a in entry.attrs:
            if a.name == "compute":
                if a.args is not None:
                    raise self.err("@compute takes no arguments", a.line, a.column)
            elif a.name == "workgroup_size":
                if not a.args or len(a.args) > 3:
                    raise self.err("@workgroup_size takes 1 to 3 arguments", a.line, a.column)
                size = [
                    _int_arg(Attr(a.name, (e,), a.line, a.column), values, self.filename)
                    for e in a.args
                ]
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
                name = first.name if isinstance(first, ir.Name) else None
                return tuple(size), name
            else:
                raise self.err(f"attribute @{a.name} on the entry point", a.line, a.column)
        raise self.err("@compute without @workgroup_size", entry.line)

    def builtins(self, entry: FnDecl, main: Scope) -> tuple[tuple[str, str], ...]:
        if entry.ret is not None:
            raise self.err("an entry point with a return type", entry.line)
        out = []
        for attrs, pname, pty in entry.params:
            if len(attrs) != 1 or attrs[0].name != "builtin" or attrs[0].args is None:
                raise self.err(f"entry point parameter '{pname}' without @builtin", entry.line)
            arg = attrs[0].args
            if (
                len(arg) != 1
                or not isinstance(arg[0], ir.Name)
                or arg[0].name not in ir.BUILTIN_INPUTS
            ):
                raise self.err(
                    f"@builtin of '{pname}' (one of {', '.join(ir.BUILTIN_INPUTS)})",
                    attrs[0].line,
                    attrs[0].column,
                )
            want = ir.builtin_type(arg[0].name)
            if pty != want:
                raise self.err(f"builtin '{pname}' of type {pty} ({want})", attrs[0].line)
            twice = [p for p, b in out if b == arg[0].name]
            if twice:
                raise WgslTypeError(
                    f"@builtin({arg[0].name}) on '{twice[0]}' and '{pname}': WGSL takes each "
                    "builtin once",
                    self.filename,
                    attrs[0].line,
                )
            out.append((pname, arg[0].name))
            self._declare(
                main, pname, Symbol(want, "builtin"), entry, f"parameter {pname}", entry.line
            )
        return tuple(out)

    def _declare(
        self, scope: Scope, name: str, sym: Symbol, node: Any, what: str, line: int | None
    ) -> None:
        """``scope.declare``, a name no declaration may take, or one declared twice, a located
        error."""
        problem = name_problem(name)
        if problem is not None:
            raise WgslTypeError(f"{what}: {problem}", self.filename, line)
        try:
            scope.declare(name, sym, node)
        except VerifyError:
            raise WgslTypeError(f"{what} is already declared", self.filename, line) from None

    def function(self, fn: FnDecl, scope: Scope, typer: Typer) -> ir.Function:
        if fn.attrs:
            a = fn.attrs[0]
            raise self.err(f"attribute @{a.name} on helper function {fn.name}", a.line, a.column)
        inner = Scope(scope)
        params = []
        for attrs, pname, pty in fn.params:
            pty = typer.resolve(pty) if isinstance(pty, StructRef) else pty
            if attrs or not (isinstance(pty, (Scalar, Vec, Mat, Ptr)) or value_struct(pty)):
                raise self.err(
                    f"parameter {pname} of {fn.name}: scalars, vectors, matrices, structs and "
                    "pointers only",
                    fn.line,
                )
            if isinstance(pty, Ptr):
                try:
                    check_pointer_type(f"parameter {pname} of {fn.name}", pty)
                except VerifyError as err:
                    raise WgslTypeError(str(err), self.filename, fn.line) from None
            self._declare(inner, pname, Symbol(pty, "param"), fn, f"parameter {pname}", fn.line)
            params.append((pname, pty))
        if isinstance(fn.ret, Ptr):
            raise WgslTypeError(
                f"{fn.name} returns {fn.ret}: WGSL refuses a function returning a pointer",
                self.filename,
                fn.line,
            )
        ret = typer.resolve(fn.ret) if isinstance(fn.ret, StructRef) else fn.ret
        if ret is not None and not (isinstance(ret, (Scalar, Vec, Mat)) or value_struct(ret)):
            raise self.err(
                f"{fn.name} returns {ret} (scalars, vectors, matrices and structs only)", fn.line
            )
        typer.line = fn.line
        body = typer.block(fn.body, inner, ret, False)
        out = ir.Function(fn.name, tuple(params), ret, body)
        typer.checker.functions[fn.name] = out
        return out


def _literal_types(e: ir.Expr, consts: tuple[ir.Const, ...]) -> set[str]:
    """The concrete integer types ``e``'s suffixed literals and const names carry (an abstract
    literal carries none)."""
    typed = {c.name: str(c.ty) for c in consts}
    out = set()
    for node in ir.walk(e):
        if type(node) is RawLit and node.ty is not None:
            out.add(str(node.ty))
        elif type(node) is ir.Name and node.name in typed:
            out.add(typed[node.name])
    return out


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
