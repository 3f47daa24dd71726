"""The parse tree's expressions and types as IR (a rule group of
:class:`kvdsl.frontend.transform.ToIR`): names, literals, calls (builtins by the op table,
``arrayLength``, ``workgroupUniformLoad``, atomics, a module function's), constructors and
conversions (raw until the typer), indexing, unary and binary operators; and the types a
declaration names (scalars, vectors, matrices, arrays, atomics, pointers, aliases, a struct's
name)."""

from __future__ import annotations

from lark import Token, v_args
from lark.tree import Meta

from kvdsl.frontend.errors import WgslTypeError
from kvdsl.frontend.numbers import const_int, parse_number
from kvdsl.frontend.records import (
    ArrayShape,
    MatShape,
    RawAddress,
    RawCtor,
    RawLit,
    StructRef,
    VecShape,
)
from kvdsl.frontend.rules import Rules
from kvdsl.frontend.slots import FEATURE_FORMATS
from kvdsl.ir import ops
from kvdsl.ir import tree as ir
from kvdsl.ir.ops import Op
from kvdsl.ir.types import (
    POINTER_SPACES,
    SCALARS,
    TEXEL_FORMATS,
    Array,
    Atomic,
    Mat,
    Ptr,
    RuntimeArray,
    Scalar,
    SampledTexture,
    Sampler,
    StorageTexture,
    Vec,
    bool_,
    f16,
    f32,
    i32,
    u32,
)

VEC_ALIASES = {
    f"vec{n}{s}": Vec(n, ty)
    for n in (2, 3, 4)
    for s, ty in (("f", f32), ("h", f16), ("i", i32), ("u", u32))
}
MAT_ALIASES = {
    f"mat{c}x{r}{s}": Mat(c, r, ty)
    for c in (2, 3, 4)
    for r in (2, 3, 4)
    for s, ty in (("f", f32), ("h", f16))
}
#: A storage texture's access modes.
ACCESSES = ("write", "read", "read_write")
#: The depth textures of the subset.
DEPTH_TEXTURES = (
    "texture_depth_2d",
    "texture_depth_2d_array",
    "texture_depth_cube",
    "texture_depth_cube_array",
    "texture_depth_multisampled_2d",
)
#: Type names outside the subset: a texture's not read above (``texture_2d`` without its
#: sample type ...).
UNSUPPORTED_TYPE_PREFIXES = ("texture_",)


def _binary(op: Op):
    def build(self, a: ir.Expr, b: ir.Expr) -> ir.Binary:
        return ir.Binary(op, a, b)

    build.__doc__ = f"``a {ops.info(op).spelling} b``"
    return build


def _array_length(arg: object) -> ir.ArrayLength | None:
    """``arrayLength``'s node for its argument: ``&binding``, ``&rows.data`` (a struct's
    runtime-sized member), a pointer parameter ``p``, or ``&*p`` (which is ``p``); None for
    anything else."""
    if isinstance(arg, ir.Name):
        return ir.ArrayLength(arg.name, pointer=True)
    x = arg.x if isinstance(arg, RawAddress) else None
    if isinstance(x, ir.Name):
        return ir.ArrayLength(x.name)
    if isinstance(x, ir.Member) and isinstance(x.base, ir.Name):
        return ir.ArrayLength(x.base.name, x.name)
    if isinstance(x, ir.Deref) and isinstance(x.x, ir.Name):
        return ir.ArrayLength(x.x.name, pointer=True)
    return None


@v_args(inline=True)
class Expressions(Rules):
    """Expression and type rules → IR expressions and types."""

    # -- expressions --
    def name(self, tok: Token) -> ir.Name:
        return ir.Name(str(tok))

    def number(self, tok: Token) -> RawLit:
        return parse_number(tok, self.filename)

    def true(self) -> ir.Lit:
        return ir.Lit(True, bool_)

    def false(self) -> ir.Lit:
        return ir.Lit(False, bool_)

    def args(self, *args: ir.Expr) -> tuple[ir.Expr, ...]:
        return args

    def call(self, fn: Token, args: tuple[ir.Expr, ...]) -> ir.Expr:
        name = str(fn)
        if name in self.aliases and isinstance(self.aliases[name], (Scalar, Vec, Mat, Array)):
            return RawCtor(self.aliases[name], args)
        if name in SCALARS:
            return RawCtor(SCALARS[name], args)
        if name in VEC_ALIASES or name in MAT_ALIASES:
            ctor = RawCtor(VEC_ALIASES.get(name) or MAT_ALIASES[name], args)
            self.alias_ctors[id(ctor)] = name  # a call of a value where one takes the name
            return ctor
        if name == "arrayLength":
            if len(args) != 1 or (length := _array_length(args[0])) is None:
                raise self._err("arrayLength of something other than &binding", fn.line, fn.column)
            return length
        if name == "workgroupUniformLoad":
            if len(args) != 1:
                raise self._err(
                    f"workgroupUniformLoad takes 1 argument (a pointer into workgroup memory), "
                    f"got {len(args)}",
                    fn.line,
                    fn.column,
                )
            return ir.UniformLoad(args[0])
        if name.startswith("atomic") and name[6:] in ir.ATOMIC_FUNCTIONS:
            return self.atomic_call(fn, name[6:], args)
        op = ops.builtin_named(name)
        if op is not None:  # the typer checks its arity, where no module function takes the name
            node = ir.Call(op, args)
            self.calls[id(node)] = (fn.line, fn.column)
            return node
        node = ir.FnCall(name, args)
        self.calls[id(node)] = (fn.line, fn.column)
        return node

    def atomic_call(self, tok: Token, fn: str, args: tuple[ir.Expr, ...]) -> ir.AtomicCall:
        """``atomicFn(&target, args...)``: the pointer's ``&`` taken off (the typer checks
        that ``target`` is an atomic element); ``atomicFn(p, args...)`` with a pointer value
        ``p`` targets ``*p``."""
        want = ir.ATOMIC_FUNCTIONS[fn] + 1
        if len(args) != want:
            raise WgslTypeError(
                f"atomic{fn} takes {want} argument{'s' * (want > 1)} (a pointer to an atomic"
                f"{' and ' + str(want - 1) + ' value' + 's' * (want > 2) if want > 1 else ''}),"
                f" got {len(args)}",
                self.filename,
                tok.line,
            )
        if not isinstance(args[0], RawAddress):  # a pointer value: a let or a parameter
            return ir.AtomicCall(fn, ir.Deref(args[0]), tuple(args[1:]))
        return ir.AtomicCall(fn, args[0].x, tuple(args[1:]))

    def construct(self, ty, args: tuple[ir.Expr, ...]) -> RawCtor:
        return RawCtor(ty, args)

    def mat_inferred(self, kw: Token, args: tuple[ir.Expr, ...]) -> RawCtor:
        """``matCxR(...)``: the element type comes from the arguments (the typer's)."""
        return RawCtor(MatShape(int(str(kw)[3]), int(str(kw)[5])), args)

    def vec_inferred(self, kw: Token, args: tuple[ir.Expr, ...]) -> RawCtor:
        """``vecN(...)``: the element type comes from the arguments (the typer's)."""
        return RawCtor(VecShape(int(str(kw)[3])), args)

    def array_inferred(self, args: tuple[ir.Expr, ...]) -> RawCtor:
        """``array(...)``: the element type and count come from the arguments (the typer's)."""
        return RawCtor(ArrayShape(), args)

    @v_args(meta=True, inline=True)
    def bitcast(self, meta: Meta, ty, args) -> ir.Expr:
        if len(args) != 1:
            raise WgslTypeError(
                f"bitcast takes one argument, got {len(args)}", self.filename, meta.line,
                meta.column,
            )  # fmt: skip
        return ir.Bitcast(ty, args[0])

    def index(self, base: ir.Expr, i: ir.Expr) -> ir.Index:
        return ir.Index(base, i)

    def member(self, base: ir.Expr, name: Token) -> ir.Member:
        return ir.Member(base, str(name))

    def neg(self, x: ir.Expr) -> ir.Expr:
        # "-3" is one negative literal (the emitter prints negative literals that way); a u32
        # has no negation, "-0u" included, so its minus stays an operator for the typer to refuse.
        if isinstance(x, RawLit) and not x.negated and x.ty != u32:
            return RawLit(-x.value, x.ty, True)
        return ir.Unary(Op.NEG, x)

    def logic_not(self, x: ir.Expr) -> ir.Unary:
        return ir.Unary(Op.NOT, x)

    def bit_not(self, x: ir.Expr) -> ir.Unary:
        return ir.Unary(Op.BITNOT, x)

    @v_args(meta=True, inline=True)
    def address_of(self, meta: Meta, x: ir.Expr) -> RawAddress:
        # Only arrayLength(&binding) takes one (see call); anywhere else the typer refuses it.
        return RawAddress(x, meta.line, meta.column)

    def deref(self, x: ir.Expr) -> ir.Deref:
        return ir.Deref(x)

    mul = _binary(Op.MUL)
    div = _binary(Op.DIV)
    mod = _binary(Op.MOD)
    add = _binary(Op.ADD)
    sub = _binary(Op.SUB)
    shl = _binary(Op.SHL)
    shr = _binary(Op.SHR)
    lt = _binary(Op.LT)
    le = _binary(Op.LE)
    gt = _binary(Op.GT)
    ge = _binary(Op.GE)
    eq = _binary(Op.EQ)
    ne = _binary(Op.NE)
    bit_and = _binary(Op.AND)
    bit_or = _binary(Op.OR)
    bit_xor = _binary(Op.XOR)
    land = _binary(Op.LAND)
    lor = _binary(Op.LOR)

    # -- types --
    def named_type(self, tok: Token):
        name = str(tok)
        if name in self.aliases:
            return self.aliases[name]
        if name in SCALARS:
            return SCALARS[name]
        if name in VEC_ALIASES or name in MAT_ALIASES:
            return VEC_ALIASES.get(name) or MAT_ALIASES[name]
        if name in ("sampler", "sampler_comparison"):
            return Sampler(name == "sampler_comparison")
        if name in DEPTH_TEXTURES:
            ms = name == "texture_depth_multisampled_2d"
            return SampledTexture(f32, 2, name.endswith("_array"), True, "cube" in name, ms)
        if name == "texture_external":
            return SampledTexture(f32, 2, external=True)
        if name.startswith(UNSUPPORTED_TYPE_PREFIXES):
            raise self._err(f"type '{name}'", tok.line, tok.column)
        return StructRef(name, tok.line, tok.column)

    def template_type(self, tok: Token, *args):
        if str(tok) == "atomic" and len(args) == 1:
            if args[0] not in (u32, i32):
                raise WgslTypeError(
                    f"atomic<{args[0]}>: WGSL's atomics are atomic<u32> and atomic<i32>",
                    self.filename,
                    tok.line,
                )
            return Atomic(args[0])
        if str(tok) == "ptr":
            return self._pointer_type(tok, args)
        if str(tok) in ("texture_1d", "texture_2d", "texture_3d", "texture_2d_array"):
            if len(args) == 1 and args[0] in (f32, u32, i32):
                return SampledTexture(args[0], int(str(tok)[8]), str(tok).endswith("_array"))
            raise self._err(
                f"{tok}<{', '.join(map(str, args))}> (sample types f32, u32, i32)",
                tok.line,
                tok.column,
            )
        if str(tok) in ("texture_cube", "texture_cube_array", "texture_multisampled_2d"):
            if len(args) == 1 and args[0] in (f32, u32, i32):
                if str(tok) == "texture_multisampled_2d":
                    return SampledTexture(args[0], 2, multisampled=True)
                return SampledTexture(args[0], 2, str(tok).endswith("_array"), cube=True)
            raise self._err(
                f"{tok}<{', '.join(map(str, args))}> (sample types f32, u32, i32)",
                tok.line,
                tok.column,
            )
        if str(tok) in (
            "texture_storage_1d",
            "texture_storage_2d",
            "texture_storage_3d",
            "texture_storage_2d_array",
        ):
            words = [a.name if isinstance(a, StructRef) else None for a in args]
            formats = (*TEXEL_FORMATS, *FEATURE_FORMATS)  # WGSL's (kvdsl.frontend.slots)
            if len(words) == 2 and words[0] in formats and words[1] in ACCESSES:
                arrayed = str(tok).endswith("_array")
                return StorageTexture(words[0], words[1], int(str(tok)[16]), arrayed)
            raise self._err(
                f"{tok}<{', '.join(map(str, words))}> (the formats "
                f"{', '.join(formats)}; write, read or read_write access)",
                tok.line,
                tok.column,
            )
        raise self._err(f"type '{tok}<...>'", tok.line, tok.column)

    def _pointer_type(self, tok: Token, args) -> Ptr:
        """``ptr<space, T[, access]>``: the space and access are words (read as type names)."""
        words = [a.name if isinstance(a, StructRef) else None for a in args]
        if len(args) not in (2, 3) or words[0] is None:
            raise WgslTypeError(
                "ptr takes an address space, a type and, for storage, an access mode "
                "(ptr<function, f32>, ptr<storage, array<u32>, read_write>)",
                self.filename,
                tok.line,
                tok.column,
            )
        space, store = words[0], args[1]
        if space not in POINTER_SPACES:
            raise WgslTypeError(
                f"ptr<{space}, ...>: the address space is one of {', '.join(POINTER_SPACES)}",
                self.filename,
                tok.line,
                tok.column,
            )
        if len(args) == 3:
            access = words[2]
            if access not in ("read", "read_write") or space not in ("storage", "uniform"):
                raise WgslTypeError(
                    f"ptr<{space}, {store}, {access or args[2]}>: an access mode is given for "
                    "storage only, read or read_write (uniform: read)",
                    self.filename,
                    tok.line,
                    tok.column,
                )
        else:
            access = "read" if space in ("storage", "uniform") else "read_write"
        if not isinstance(store, (Scalar, Vec, Mat, Array, RuntimeArray, Atomic, StructRef)):
            raise self._err(f"ptr<{space}, {store}> (pointers to scalars, vectors, matrices, arrays, structs, atomics)",
                            tok.line, tok.column)  # fmt: skip
        return Ptr(space, store, access)

    def mat_type(self, kw: Token, elem) -> Mat:
        if elem not in (f32, f16):
            raise WgslTypeError(
                f"{kw}<{elem}>: a matrix's elements are f32 or f16", self.filename, kw.line,
                kw.column,
            )  # fmt: skip
        return Mat(int(str(kw)[3]), int(str(kw)[5]), elem)

    def vec_type(self, kw: Token, elem) -> Vec:
        if not isinstance(elem, Scalar):
            what = elem.name if isinstance(elem, StructRef) else elem
            raise WgslTypeError(
                f"{kw}<{what}>: a vector's element type is bool, f32, f16, i32 or u32",
                self.filename, kw.line, kw.column,
            )  # fmt: skip
        return Vec(int(str(kw)[3]), elem)

    @v_args(meta=True, inline=True)
    def runtime_array_type(self, meta: Meta, elem) -> RuntimeArray:
        if isinstance(elem, StructRef):
            return RuntimeArray(elem)  # an array of structs (resolved with the module's structs)
        if isinstance(elem, (Array, Mat)):
            return RuntimeArray(elem)  # of arrays or matrices: array<array<f32, 4>> (as words)
        return RuntimeArray(self._elem(elem, meta))

    @v_args(meta=True, inline=True)
    def fixed_array_type(self, meta: Meta, elem, count: ir.Expr) -> Array:
        n = const_int(count, self.consts, (self.filename, meta.line, meta.column))
        if n <= 0:
            raise WgslTypeError(
                f"array count ({n}) must be greater than 0", self.filename, meta.line, meta.column
            )
        if isinstance(elem, (Array, StructRef, Mat)):
            return Array(elem, n)  # nested: array<array<f32, 4>, 16>; of structs: resolved later
        return Array(self._elem(elem, meta), n)

    def _elem(self, elem, meta: Meta):
        """``elem`` when an array may hold it; else an error at the array type."""
        if isinstance(elem, RuntimeArray):
            raise WgslTypeError(
                f"array of {elem}: an array element type cannot contain a runtime-sized array",
                self.filename,
                meta.line,
                meta.column,
            )
        if not isinstance(elem, (Scalar, Vec, Atomic)):
            message = f"array of {elem}: only arrays of scalars, vectors and atomics"
            raise self._err(message, meta.line, meta.column)
        return elem
