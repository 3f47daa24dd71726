"""``parse(text) -> Kernel``: WGSL in the subset of ``wgsl.lark`` (package data) back into the IR.

Three passes: lark's LALR parser (errors become :class:`WgslSyntaxError` at the token), the
:class:`~kvdsl.frontend.transform.ToIR` transformer (rule by rule to raw IR, rejecting constructs
outside the subset where they stand), and the :class:`~kvdsl.frontend.typer.Typer` (abstract
literals typed by context, every statement checked with its line). The module's declarations
become the kernel's interface (:mod:`kvdsl.frontend.interface`: storage bindings in
binding-number order, the uniform's struct as params, workgroup vars) and its parts: consts
with the ``//`` lines directly above them as comments, helper functions, the ``@compute`` entry
point's workgroup size, builtins and body, and the ``//`` lines directly above ``@compute`` as
``doc``. Finally :func:`~kvdsl.ir.verify.verify` runs on the result.
"""

from __future__ import annotations

import functools
import re
from dataclasses import replace
from importlib import resources
from pathlib import Path

from lark import Lark, Token
from lark.exceptions import UnexpectedInput, VisitError

from kvdsl.frontend import comments as comments_
from kvdsl.frontend.depth import check_depth
from kvdsl.frontend.errors import (
    FrontendError,
    UnsupportedError,
    WgslSyntaxError,
    WgslTypeError,
    check_identifiers,
    check_template_lists,
    check_words,
    position,
    syntax_error,
    template_lists,
)
from kvdsl.frontend.interface import Interface
from kvdsl.frontend.entry import LANGUAGE_FEATURES, SEVERITIES, EntryPoint
from kvdsl.frontend.order import in_dependency_order
from kvdsl.frontend.records import (
    ConstDecl,
    FnDecl,
    GlobalVar,
    Module,
    ModuleAssert,
    StructDecl,
    StructRef,
)
from kvdsl.frontend.abstract import abstract_float, is_abstract
from kvdsl.frontend.transform import ToIR
from kvdsl.frontend.shadows import resolve_shadows
from kvdsl.frontend.slots import FEATURE_FORMATS, bindable, one_per_slot
from kvdsl.frontend.typer import Typer
from kvdsl.ir import tree as ir
from kvdsl.ir import uniformity
from kvdsl.ir.types import (
    Array,
    Mat,
    Ptr,
    HANDLES,
    Scalar,
    StorageTexture,
    Struct,
    Vec,
    bool_,
    f32,
)
from kvdsl.ir.features import uses_f16
from kvdsl.ir.scope import Scope, Symbol, VerifyError, name_problem
from kvdsl.ir.verify import (
    Verifier,
    check_pointer_type,
    check_private_var,
    module_scope,
    value_struct,
    verify,
)


def grammar() -> str:
    """The text of ``wgsl.lark``, the grammar of the accepted subset (package data)."""
    return resources.files("kvdsl.frontend").joinpath("wgsl.lark").read_text(encoding="utf-8")


class _WholeWords:
    """Lark's contextual lexer offers in each parser state only the terminals that state
    accepts; where a name cannot stand (between module declarations, say) it matched a keyword
    at the start of a longer word, so ``constHALF: u32 = 16u;`` read as ``const HALF``, which
    WGSL refuses. Offered ``NAME`` everywhere (a post-lexer's ``always_accept``), the lexer takes
    the whole word, a keyword only where the word is one, and the parser refuses the name.
    ``++`` and ``--`` likewise, ``--`` then split where no decrement statement ends there
    (:meth:`ends_statement`)."""

    always_accept = ("NAME", "_INCREMENT", "_DECREMENT")
    #: Offsets of the ``>`` that close template lists in the text being parsed (WGSL's
    #: template-list discovery): a ``>>`` token starting at one is two closers
    #: (``ptr<function, array<f32, 4>>``), where an expression's state offered the shift.
    closers: frozenset[int] = frozenset()
    #: Offsets of the ``<`` that open template lists.
    openers: frozenset[int] = frozenset()
    #: The text being parsed (comments blanked), and the type generators (``vec2``, ``array``,
    #: ``bitcast`` ...) a module function, struct or alias takes the name of.
    code: str = ""
    generator_fns: frozenset[str] = frozenset()
    generator_names: frozenset[str] = frozenset()  # those any declaration takes

    def generator_as_name(self, tok: Token) -> bool:
        """Whether ``tok``, a type generator's keyword where an expression or a type may stand,
        is a declaration's name (WGSL lets one take it: ``let vec2 = 1u;``): followed by
        neither a template list nor ``(`` (a constructor), or by ``(`` where a module function,
        struct or alias takes the name (a call of it, or its constructor)."""
        if tok.value not in self.generator_names:
            return False
        j = _BLANKS.match(self.code, tok.end_pos).end()
        after = self.code[j : j + 1]
        if after == "<":
            return j not in self.openers
        return after != "(" or tok.value in self.generator_fns

    def ends_statement(self, tok: Token) -> bool:
        """Whether ``--`` token ``tok`` is a decrement statement's, followed by the ``;`` or
        the ``)`` (a ``for`` loop's update) that ends one. WGSL tokenises in context: where a
        decrement cannot stand (``1i--1i``, ``a--1``, in an expression), ``--`` is two ``-``,
        as Tint reads it; the contextual lexer, offered ``--`` everywhere, took it whole."""
        j = _BLANKS.match(self.code, tok.end_pos).end()
        return self.code[j : j + 1] in (";", ")")

    def process(self, stream):
        for tok in stream:
            if (
                tok.type != "NAME"
                and _GENERATOR.fullmatch(tok.value)
                and self.generator_as_name(tok)
            ):
                yield tok.update(type="NAME")
            elif (tok.value == ">>" and tok.start_pos in self.closers) or (
                tok.type == "_DECREMENT" and not self.ends_statement(tok)
            ):
                for k in (0, 1):
                    yield Token(
                        "MORETHAN" if tok.value == ">>" else "MINUS",
                        tok.value[k],
                        start_pos=tok.start_pos + k,
                        line=tok.line,
                        column=tok.column + k,
                        end_line=tok.line,
                        end_column=tok.column + k + 1,
                        end_pos=tok.start_pos + k + 1,
                    )
            else:
                yield tok


#: The keywords of WGSL's type generators the grammar reads (a declaration may take one's name).
_GEN = r"vec[234]|mat[234]x[234]|array|bitcast"
_GENERATOR = re.compile(_GEN)
_BLANKS = re.compile(r"\s*")


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
    check_identifiers(code, filename)
    check_template_lists(code, filename)
    parser = wgsl_parser()
    found_lists = template_lists(code)
    _WholeWords.closers = frozenset(gt for _, _, gt in found_lists)
    _WholeWords.openers = frozenset(lt for _, lt, _ in found_lists)
    _WholeWords.code = code
    _WholeWords.generator_fns = frozenset(re.findall(rf"\b(?:fn|struct|alias)\s+({_GEN})\b", code))
    _WholeWords.generator_names = frozenset(
        re.findall(rf"\b(?:let|const|fn|struct|alias|override)\s+({_GEN})\b", code)
        + re.findall(rf"\bvar\b(?:\s*<[^>]*>)?\s+({_GEN})\b", code)
        + re.findall(rf"\b({_GEN})\s*:", code)  # a parameter
    )
    try:
        # The comments blanked: the grammar's comment terminals cannot nest block comments.
        tree = parser.parse(code)
    except UnexpectedInput as err:
        raise syntax_error(err, parser, text, filename) from None
    renamed = resolve_shadows(tree, frozenset(re.findall(r"\w+", code)), filename)
    own = {old: new for new, old in renamed.items()}  # an override named like a type: f32_
    to_ir = ToIR(filename, found, {own.get(str(k), k): v for k, v in (constants or {}).items()})
    try:
        module = to_ir.transform(in_dependency_order(tree))
    except VisitError as err:
        if isinstance(err.orig_exc, FrontendError):
            raise err.orig_exc from None
        raise
    _aliases_declared_once(module, to_ir.alias_lines, filename)
    unused = sorted(str(k) for k in to_ir.constants if k not in to_ir.overridden)
    if unused:
        names = ", ".join(sorted(to_ir.overridden_names)) or "none"
        raise WgslTypeError(
            f"constants: no override named {', '.join(unused)} (the module's: {names})",
            filename,
            None,
        )
    assembler = _Assembler(module, filename, found, to_ir, rounded)
    assembler.words = frozenset(re.findall(r"\w+", code))
    return assembler.kernel(_name(filename), dispatch)


def _aliases_declared_once(module: Module, aliases: dict[str, int], filename: str) -> None:
    """Refuse, as Tint does, an alias named like another module-scope declaration (a binding,
    var, const, override, struct or function), at the later of the two."""
    for d in module.decls:
        line = aliases.get(getattr(d, "name", None))
        if line is not None:
            raise WgslTypeError(f"redeclaration of '{d.name}'", filename, max(line, d.line))


def _name(filename: str) -> str:
    if filename.startswith("<"):
        return "main"
    return Path(filename).stem or "main"


class _Assembler(EntryPoint):
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
        self.must_use: set[str] = set()  # the helpers marked @must_use
        self.member_builtins = to_ir.member_builtins  # struct -> member -> @builtin
        self.steps = to_ir.steps  # id(Assign) of each `lhs++` and `lhs--`
        self.alias_ctors = to_ir.alias_ctors
        self.folded = to_ir.consts  # the integer consts and struct consts' members, folded
        self.words: frozenset[str] = frozenset()  # every word of the module's text
        self.derived_inputs: dict[str, str] = {}  # parameter -> builtin, a let of the body
        # The module consts of an abstract float no concrete type holds, which the kernel does
        # not declare (each use reads the value in its place), by name.
        self.unheld: dict[str, ConstDecl] = {}

    def err(self, message: str, line: int | None, column: int | None = None) -> UnsupportedError:
        return UnsupportedError(message, self.filename, line, column)

    def kernel(self, name: str, dispatch: ir.Dispatch | None) -> tuple[ir.Kernel, dict[int, int]]:
        enabled, kept = self.enabled()
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
        interface = Interface(self.filename, self.comments, self.decl_lines)
        params, bindings, shared = interface.declarations(structs, gvars)
        held = [  # typed as WGSL types them, then left out of the kernel or refused (bindable)
            t
            for t in interface.textures
            if isinstance(t.ty, StorageTexture) and t.ty.format in FEATURE_FORMATS
        ]
        probe = ir.Kernel(
            name,
            bindings,
            params,
            (),
            (),
            (1, 1, 1),
            (),
            (),
            workgroup_vars=shared,
            uniforms=interface.uniforms,
            textures=tuple(t for t in interface.textures if t not in held),
        )
        checker = Verifier(probe)
        checker.function_names = frozenset(fn.name for fn in fns if fn is not entry)
        typer = Typer(checker, self.filename, self.raw_lines, self.calls, self.rounded)
        typer.structs = interface.structs
        if params is not None and params.name not in typer.structs:
            # The params struct names a type too: ptr<uniform, P>, let q: P = params;
            typer.structs = {**interface.structs, params.name: params}
        self.interface_structs = interface.structs
        for fn in fns:
            if fn is not entry:
                self.helper_attrs(fn)
        typer.must_use = frozenset(self.must_use)
        typer.steps = self.steps
        typer.alias_ctors = self.alias_ctors
        typer.overrides = frozenset(
            d.name for d in self.module.decls if isinstance(d, ConstDecl) and d.override
        )
        consts = self.consts(typer)
        wg, wg_name = self.workgroup_size(entry, consts)
        probe = replace(probe, consts=consts)
        scope = self.scope(probe, checker, typer)
        for d in self.unheld.values():  # its name taken, as WGSL takes it, for what follows
            self._declare(scope, d.name, Symbol(f32, "const"), d, f"const {d.name}", d.line)
        for t in held:
            scope.declare(t.name, Symbol(t.ty, "texture"), t)
        private = self.private_vars(gvars, scope, checker, typer)
        functions = []
        for fn in fns:
            if fn is not entry:
                functions.append(self.function(fn, scope, typer))
        asserts = []
        for a in self.module.decls:
            if isinstance(a, ModuleAssert):
                typer.line = a.line
                cond = typer.expr(a.cond, scope, bool_)
                typer.no_override("const_assert", "const assertion", cond, scope)
                try:
                    checker.const_assert(cond, scope)
                except VerifyError as err:
                    raise WgslTypeError(str(err), self.filename, a.line) from None
                asserts.append(cond)
        directives = (*kept, *self.directives())
        main = Scope(scope)
        builtins, prelude = self.builtins(entry, main, wg)
        typer.line = entry.line
        body = typer.block(prelude + entry.body, main, None, False)
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
            uniforms=interface.uniforms,
            private_vars=private,
            textures=tuple(interface.textures),
            directives=directives,
            asserts=tuple(asserts),
        )
        if uses_f16(kernel) and "f16" not in enabled:
            raise WgslTypeError("f16 is used without 'enable f16;'", self.filename, 1)
        # A subgroup builtin is taken with or without 'enable subgroups;': naga (wgpu) refuses
        # the directive and takes the builtins under the adapter's subgroup feature.
        kernel = bindable(kernel, self.filename, self.decl_lines)
        try:
            verify(kernel, house=False)  # kvdsl's rules for its catalog: notes (house_notes)
        except VerifyError as err:
            line = typer.lines.get(id(err.node)) if err.node is not None else None
            if line is None:
                line = self._line_of(str(err), entry)
            raise WgslTypeError(str(err), self.filename, line) from None
        if self.derived_inputs:
            self.derived_uniformity(kernel, typer.lines)
        if interface.shared_slots:
            kernel = one_per_slot(kernel, interface.shared_slots, self.filename, self.decl_lines)
        return kernel, typer.lines

    def derived_uniformity(self, kernel: ir.Kernel, lines: dict[int, int]) -> None:
        """WGSL's uniformity analysis of an entry point taking a builtin of
        :data:`kvdsl.frontend.entry.DERIVED_INPUTS`: the builtin may be non-uniform (as Tint
        holds the ``workgroup_index`` too), though its ``let`` reads uniform builtins."""
        derived = self.derived_inputs
        body = tuple(s for s in kernel.body if not (type(s) is ir.Let and s.name in derived))
        why = {p: f"'{p}' ({b}, which differs between invocations)" for p, b in derived.items()}
        try:
            uniformity.check(replace(kernel, body=body), why)
        except uniformity.UniformityError as err:
            line = lines.get(id(err.node)) if err.node is not None else None
            raise WgslTypeError(str(err), self.filename, line or 1) from None

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
            raw = typer.inline(d.value, scope) if d.ty is None and not d.override else None
            try:
                value = typer.expr(d.value, scope, declared)
            except WgslTypeError:
                if raw is None or abstract_float(raw) is None:
                    raise
                # An abstract float no concrete type holds (const BIG = 1e50;): WGSL takes it
                # where every use stays abstract, and each reads it in its place; no typed
                # declaration could print it, so the kernel has none.
                self._declare(scope, d.name, Symbol(f32, "const"), d, f"const {d.name}", d.line)
                typer.module_abstract[d.name] = raw
                self.decl_lines[d.name] = d.line
                self.unheld[d.name] = d
                continue
            if not d.override:
                typer.no_override(f"const {d.name}", "const initializer", value, scope)
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
            if raw is not None and isinstance(ty, Scalar) and is_abstract(raw):
                typer.module_abstract[d.name] = raw  # read in its place, as WGSL reads it
            self.decl_lines[d.name] = d.line
            comment = "\n".join(comments_.run_above(self.comments, d.line))
            out.append(ir.Const(d.name, ty, value, comment))
        return tuple(out)

    def private_vars(
        self, gvars: list[GlobalVar], scope: Scope, checker: Verifier, typer: Typer
    ) -> tuple[ir.PrivateVar, ...]:
        """The ``var<private>`` declarations, each typed and declared in ``scope`` (the module's,
        which the helpers and the entry point see)."""
        out = []
        for g in gvars:
            if g.space != "private":
                continue
            if g.attrs or g.access is not None:
                what = f"@{g.attrs[0].name}" if g.attrs else f"access mode {g.access}"
                raise WgslTypeError(
                    f"var<private> {g.name}: {what} (a private var takes no attribute and no "
                    "access mode)",
                    self.filename,
                    g.line,
                )
            typer.line = g.line
            declared = None if g.ty is None else typer.resolve(g.ty)
            if declared is None and g.init is None:
                raise WgslTypeError(
                    f"var<private> {g.name}: neither a type nor an initialiser",
                    self.filename,
                    g.line,
                )
            init = None if g.init is None else typer.expr(g.init, scope, declared)
            v = ir.PrivateVar(g.name, declared or typer.type_of(init, scope), init)
            try:
                check_private_var(v, checker, scope)
            except VerifyError as err:
                raise WgslTypeError(str(err), self.filename, g.line) from None
            what = f"var<private> {g.name}"
            self._declare(scope, g.name, Symbol(v.ty, "private"), v, what, g.line)
            self.decl_lines[g.name] = g.line
            out.append(v)
        return tuple(out)

    def scope(self, probe: ir.Kernel, checker: Verifier, typer: Typer) -> Scope:
        try:
            return module_scope(probe, checker)
        except VerifyError as err:
            raise WgslTypeError(str(err), self.filename, self._line_of(str(err), None)) from None

    def function(self, fn: FnDecl, scope: Scope, typer: Typer) -> ir.Function:
        inner = Scope(scope)
        params = []
        for attrs, pname, pty in fn.params:
            pty = typer.resolve(pty) if isinstance(pty, (StructRef, Ptr)) else pty
            if attrs or not (
                isinstance(pty, (Scalar, Vec, Mat, Ptr, *HANDLES)) or value_struct(pty)
            ):
                raise self.err(
                    f"parameter {pname} of {fn.name}: scalars, vectors, matrices, structs, "
                    "pointers and storage textures only",
                    fn.line,
                )
            if isinstance(pty, Ptr):
                try:
                    check_pointer_type(f"parameter {pname} of {fn.name}", pty)
                except VerifyError as err:
                    raise WgslTypeError(str(err), self.filename, fn.line) from None
            what = f"parameter {pname}"
            kind = "texture" if isinstance(pty, HANDLES) else "param"
            self._declare(inner, pname, Symbol(pty, kind), fn, what, fn.line, local=True)
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
