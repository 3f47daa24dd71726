"""Names and scopes: what a name in scope refers to, nested lexical scopes, and which names a
WGSL declaration may take; :class:`VerifyError`, the error of every verification.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kvdsl.ir import tree as ir
from kvdsl.ir import ops
from kvdsl.ir.show import show
from kvdsl.ir.slots import slot_init
from kvdsl.ir.types import Struct, Type


class VerifyError(ValueError):
    """The IR is ill-typed or ill-formed; the message names the node. ``node``: the statement
    at fault where the check knows it (the uniformity analysis does), else None."""

    def __init__(self, message: str, node: object | None = None) -> None:
        super().__init__(message)
        self.node = node


@dataclass(frozen=True, slots=True)
class Symbol:
    """What a name in scope refers to."""

    ty: Type
    kind: str  # "let", "var", "const", "binding", "builtin", "param", "params", "workgroup",
    # "uniform", "private"
    access: str = ""
    value: ir.Expr | None = None  # a const's value, folded on demand (Verifier.const_int)


slot_init(Symbol)  # a Symbol per declaration: the cheaper __init__ of the IR nodes


class Scope:
    """Nested lexical scopes of declared names.

    Each scope keeps the names declared in it and a flat map of every name visible in it, copied
    from the outer scope when it is made: lookups are one dict access, however deep the nesting.
    So an inner scope sees the outer scope's names as of its creation, which is how the verifier
    uses scopes (a block's scope is made, used and dropped while its outer block is paused).
    """

    __slots__ = ("names", "visible")

    def __init__(self, outer: Scope | None = None) -> None:
        self.names: dict[str, Symbol] = {}
        self.visible: dict[str, Symbol] = {} if outer is None else outer.visible.copy()

    def lookup(self, name: str) -> Symbol | None:
        return self.visible.get(name)

    def declare(self, name: str, sym: Symbol, node: object, local: bool | None = None) -> None:
        """Declare ``name`` for ``node`` (``local``: whether at function scope; by default, of
        a let, var, function parameter or builtin parameter)."""
        if name not in _NAMES_OK:
            check_name(name, node, type(node) in _LOCAL if local is None else local)
        if name in self.names:
            raise VerifyError(f"{show(node)}: '{name}' is already declared in this scope")
        self.names[name] = sym
        self.visible[name] = sym


#: WGSL's keywords and reserved words (WGSL spec, "Keyword summary" and "Reserved words"): no
#: declaration may take one of these names.
KEYWORDS = frozenset(
    "alias break case const const_assert continue continuing default diagnostic discard else "
    "enable false fn for if let loop override requires return struct switch true var while".split()
)
RESERVED = frozenset(
    "NULL Self abstract active alignas alignof as asm asm_fragment async attribute auto await "
    "become cast catch class co_await co_return co_yield coherent column_major "
    "common compile compile_fragment concept const_cast consteval constexpr constinit crate "
    "debugger decltype delete demote demote_to_helper do dynamic_cast enum explicit export "
    "extends extern external fallthrough filter final finally friend from fxgroup get goto "
    "groupshared highp impl implements import inline instanceof interface layout lowp macro "
    "macro_rules match mediump meta mod module move mut mutable namespace new nil noexcept "
    "noinline nointerpolation noperspective null nullptr of operator package packoffset "
    "partition pass patch pixelfragment precise precision premerge priv protected pub public "
    "readonly ref regardless register reinterpret_cast require resource restrict self set "
    "shared sizeof smooth snorm static static_assert static_cast std subroutine super target "
    "template this thread_local throw trait try type typedef typeid typename typeof union "
    "unless unorm unsafe unsized use using varying virtual volatile wgsl where with writeonly "
    "yield".split()
)
#: Names WGSL predeclares that kvdsl reads as the type or builtin everywhere: its types and type
#: generators, and the builtins the frontend reads as statements or nodes of their own. WGSL lets
#: a declaration shadow one, but kvdsl would still read the type or builtin there, so no
#: declaration may take one. A struct member may (it shadows nothing), and a function-scope
#: declaration may take an alias (:data:`SHADOWABLE`).
PREDECLARED = frozenset(
    "bool i32 u32 f32 f16 vec2 vec3 vec4 mat2x2 mat2x3 mat2x4 mat3x2 mat3x3 mat3x4 mat4x2 mat4x3 "
    "mat4x4 array atomic ptr sampler sampler_comparison workgroupBarrier storageBarrier "
    "workgroupUniformLoad bitcast arrayLength".split()
    + [f"vec{n}{t}" for n in (2, 3, 4) for t in "iufh"]
    + [f"mat{c}x{r}{t}" for c in (2, 3, 4) for r in (2, 3, 4) for t in "fh"]
    + [f"atomic{fn}" for fn in ir.ATOMIC_FUNCTIONS]
)
#: The predeclared aliases a function-scope declaration (a ``let``, ``var``, ``const`` or
#: parameter) may take, as WGSL allows: within its scope the name is the declaration's, and the
#: printer spells every type with its template (``vec4<f32>``), so no type it prints names one.
SHADOWABLE = frozenset(
    [f"vec{n}{t}" for n in (2, 3, 4) for t in "iufh"]
    + [f"mat{c}x{r}{t}" for c in (2, 3, 4) for r in (2, 3, 4) for t in "fh"]
)
#: The builtin functions of the op table. A declaration may take one's name, as in WGSL: within
#: the declaration's scope the name is the declaration's (a module-scope function's in the whole
#: module), and a ``Call`` of the builtin there is refused (:func:`shadowing`), as WGSL
#: refuses calling a value, so the IR's ``Call`` always means the builtin its text names.
BUILTIN_FUNCTIONS = frozenset(
    info.spelling for info in ops.TABLE.values() if info.kind == "builtin"
)
# The nodes Scope.declare takes for function-scope declarations: a let, a var, a function's
# parameter (the function), the entry point's builtin parameter (the kernel).
_LOCAL = (ir.Let, ir.Var, ir.Function, ir.Kernel)
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _unicode_identifier(name: str) -> bool:
    """Whether ``name`` is a WGSL identifier past ASCII: XID_Start or ``_``, then
    XID_Continue (Python's identifiers, which are those; WGSL compares them code point by
    code point, unnormalised)."""
    return not name.isascii() and name.isidentifier()


# Names already found valid: a catalog build declares the same few hundred names thousands of
# times, and the check is on every declaration.
_NAMES_OK: set[str] = set()


def name_problem(name: object, member: bool = False, local: bool = False) -> str | None:
    """Why ``name`` cannot name a WGSL declaration, as ``name 'x' ...``, or None when it can
    (``local``: a function-scope one, which may take a name of :data:`SHADOWABLE`): an
    identifier (ASCII letters, digits and ``_``, or Unicode's XID_Start then XID_Continue), not ``_``
    alone, not starting ``__``, neither a keyword nor a reserved word, nor (but for a struct
    ``member``) the name of a WGSL type or of a builtin kvdsl reads structurally
    (:data:`PREDECLARED`)."""
    if name in _NAMES_OK:
        return None
    if not isinstance(name, str) or not (_IDENTIFIER.match(name) or _unicode_identifier(name)):
        why = (
            "is not a WGSL identifier: give a letter or _, then letters, digits or _ (Unicode's "
            "XID_Start, then XID_Continue)"
        )
    elif name == "_":
        why = "is not a WGSL identifier: _ alone is the phony assignment's"
    elif name.startswith("__"):
        why = "starts with __, which WGSL reserves"
    elif name in KEYWORDS:
        why = "is a WGSL keyword"
    elif name in RESERVED:
        why = "is a word WGSL reserves"
    elif name in PREDECLARED:
        if member or local and name in SHADOWABLE:
            return None  # not remembered: the next declaration of it may be neither
        why = (
            "is a WGSL type's or a builtin's that kvdsl reads as such wherever it "
            "appears: give another"
        )
    else:
        _NAMES_OK.add(name)
        return None
    return f"name {name!r} {why}"


def shadowing(spelling: str, scope: Scope, functions) -> str | None:
    """Why builtin ``spelling`` cannot be called where ``scope`` is in force, or None: a
    declaration in scope (or a module function, ``functions`` names them) takes its name."""
    if spelling in functions:
        return f"'{spelling}' names a function of this module, which a call of it calls"
    sym = scope.lookup(spelling)
    if sym is not None:
        return f"'{spelling}' is a {sym.kind} here, not the builtin function: it cannot be called"
    return None


def check_name(name: object, node: object, local: bool = False) -> None:
    """Raise :class:`VerifyError` where ``name`` cannot name the declaration ``node``
    (:func:`name_problem`; a params field is a struct member; ``local``: a function-scope
    declaration)."""
    problem = name_problem(name, member=type(node) is Struct, local=local)
    if problem is not None:
        raise VerifyError(f"{_declaring(node, name)}: {problem}")


def _declaring(node: object, name: object) -> str:
    """What declares ``name``, for an error: the statement, or the module-scope declaration."""
    kinds = {ir.Binding: "binding", ir.Const: "const", Struct: "params field", ir.Function: "function",
             ir.WorkgroupVar: "workgroup var", ir.Kernel: "builtin parameter",
             ir.Uniform: "uniform", ir.PrivateVar: "private var",
             ir.Texture: "texture"}  # fmt: skip
    kind = kinds.get(type(node))
    return show(node) if kind is None else f"{kind} {name!r}"
