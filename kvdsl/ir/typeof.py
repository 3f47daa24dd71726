"""The typing of expressions: :meth:`ExprTyper.type_of` derives an expression's type from the
declarations in scope and the op table's typing rules, and refuses what WGSL refuses of an
expression when it compiles (a constant index out of range, a constant shift or division that
is an error, a non-finite float constant: :mod:`kvdsl.ir.consteval` evaluates them).
What is reached through an address (pointers, the atomic builtins, helper calls) is typed by
its base, :class:`~kvdsl.ir.pointers.PointerTyper`.
"""

from __future__ import annotations

from kvdsl.ir import tree as ir
from kvdsl.ir import ops
from kvdsl.ir.consteval import (
    SWIZZLE,
    const_shaped,
    literal_ok,
    maybe_const,
    spread,
)
from kvdsl.ir.conststeps import shl_fits
from kvdsl.ir.ops import Op
from kvdsl.ir.pointers import PointerTyper
from kvdsl.ir.scope import Scope, VerifyError, shadowing
from kvdsl.ir.show import show
from kvdsl.ir.texturetypes import TextureTyper
from kvdsl.ir.types import Atomic, holds_atomic
from kvdsl.ir.types import (
    Array,
    Mat,
    Ptr,
    RuntimeArray,
    Scalar,
    Struct,
    Type,
    Vec,
    bitcastable,
    components,
    f16,
    f32,
    i32,
    u32,
)

_INDEXED = frozenset(("binding", "workgroup"))  # kinds of names that are used only indexed
_SHL, _SHR, _DIV, _MOD, _CLAMP = Op.SHL, Op.SHR, Op.DIV, Op.MOD, Op.CLAMP


class ExprTyper(TextureTyper, PointerTyper):
    """Types the expressions of a kernel against a scope. A base of the
    :class:`~kvdsl.ir.verify.Verifier`, which adds the statements."""

    def __init__(self, kernel: ir.Kernel) -> None:
        super().__init__()
        self.kernel = kernel
        self.functions: dict[str, ir.Function] = {}
        # Every module function's name, declared before or after (WGSL's module scope).
        self.function_names = frozenset(f.name for f in kernel.functions)
        self.used: set[str] = set()  # bindings read or written
        self.barriers = False  # a barrier or a subgroup builtin call: check_barriers runs
        self.stored: set[str] = set()  # bindings written

    # -- expressions --
    def type_of(self, e: ir.Expr, scope: Scope) -> Type:
        """The type of ``e`` in ``scope``; raises :class:`VerifyError` when ill-typed."""
        if type(e) is ir.Name:  # half of all expressions: the fast path
            name = e.name
            sym = scope.visible.get(name)
            if sym is None:
                raise VerifyError(f"undefined name '{name}'")
            kind = sym.kind
            if kind == "binding":
                return self._whole_binding(name, sym.ty)
            if kind == "workgroup":
                if type(sym.ty) is Atomic:
                    raise VerifyError(
                        f"workgroup var '{name}' of type {sym.ty} is read and written only "
                        f"through the atomic builtins (atomicLoad(&{name}) ...), not as a plain value"
                    )
                if type(sym.ty) is Array:
                    raise VerifyError(f"workgroup var '{name}' used without an index")
            return sym.ty
        match e:
            case ir.Binary(op, a, b):
                info = op._row  # ops.info(op), without the call
                if info.kind != "binary":
                    raise VerifyError(f"{show(e)}: {op.name} is not a binary operator")
                # An operand that is a plain name is typed here (type_of's fast path, without
                # the call); anything else, or a name type_of would reject, goes through it.
                visible = scope.visible
                if type(a) is ir.Name and (sym := visible.get(a.name)) and sym.kind not in _INDEXED:
                    ta = sym.ty
                else:
                    ta = self.type_of(a, scope)
                if type(b) is ir.Name and (sym := visible.get(b.name)) and sym.kind not in _INDEXED:
                    tb = sym.ty
                else:
                    tb = self.type_of(b, scope)
                try:
                    got = info.typing((ta, tb))
                except ops.OpTypeError as err:
                    raise VerifyError(f"{show(e)}: {info.spelling} {err}") from None
                if type(ta) is Mat or type(tb) is Mat:  # matrix arithmetic of constants
                    if not self._folding and const_shaped(e, scope.visible):
                        self._const_matrix(e, scope)  # raises where a value is not finite
                    return got
                # What WGSL refuses of scalar constants. The operators are tested by identity
                # against module globals: cheaper than an enum member looked up on its class, or
                # hashed, on the verifier's commonest node.
                if got is f32 or got is f16:
                    if (type(a) is not ir.Name or visible[a.name].kind == "const") and (
                        type(b) is not ir.Name or visible[b.name].kind == "const"
                    ):
                        self._const_float(e, scope)  # raises where it is not finite
                elif type(got) is Vec and (got.elem is f32 or got.elem is f16):
                    if const_shaped(e, visible):
                        self._const_num(e, scope)  # a vector of constants: raises as above
                elif op is _SHL or op is _SHR or op is _DIV or op is _MOD:
                    # The right operand's value where it is a constant, the common cases
                    # inline (a const name, a literal); a suspicious value is looked at.
                    if type(b) is ir.Name:
                        sb = visible[b.name]
                        cv = self._int_const(b.name, sb) if sb.kind == "const" else None
                        v = None if cv is None else cv[0]
                    elif type(b) is ir.Lit:
                        v = b.value if type(b.value) is int else None
                    else:
                        v = self.const_int(b, scope)
                        if v is None and isinstance(got, Vec) and got.elem.is_int:
                            self._const_vector_operands(e, scope)
                    if v is not None:
                        if isinstance(got, Vec) and type(e.a) is not ir.Name:
                            # a vector left of constants: each component over v
                            self._const_vector_operands(e, scope)
                        else:
                            self._const_operands(e, v, scope)
                return got
            case ir.Lit(value, ty):
                if ty is u32 and type(value) is int and 0 <= value < 4294967296:
                    return ty  # most literals: literal_ok's u32 case, inline
                if not isinstance(ty, Scalar) or not literal_ok(value, ty):
                    raise VerifyError(f"literal {value!r} is not a valid {ty} value")
                return ty
            case ir.Member(base, name):
                if (
                    type(base) is ir.Name
                    and (sym := scope.visible.get(base.name))
                    and sym.kind not in _INDEXED
                ):
                    bt = sym.ty  # a plain name (params, a vector), as for Binary's operands
                elif (
                    type(base) is ir.Name
                    and (sym := scope.visible.get(base.name))
                    and sym.kind == "binding"
                    and isinstance(sym.ty, Struct)
                ):
                    self.used.add(base.name)
                    bt = sym.ty  # a binding that is one struct: rows.n
                else:
                    bt = self.type_of(base, scope)
                if isinstance(bt, Struct):
                    ft = bt.field(name)
                    if ft is None:
                        fields = ", ".join(n for n, _ in bt.fields)
                        raise VerifyError(f"{show(e)}: {bt} has no field '{name}' ({fields})")
                    if type(ft) is Atomic:
                        self._plain_atomic(e, ft)
                    return ft
                if isinstance(bt, Vec):
                    if (
                        not name
                        or len(name) > 4
                        or any(SWIZZLE.find(c) not in range(bt.n) for c in name)
                    ):
                        raise VerifyError(f"{show(e)}: invalid swizzle '{name}' of {bt}")
                    return bt.elem if len(name) == 1 else Vec(len(name), bt.elem)
                raise VerifyError(f"{show(e)}: {bt} has no members")
            case ir.Index(base, index):
                if (
                    type(index) is ir.Name
                    and (sym := scope.visible.get(index.name))
                    and sym.kind not in _INDEXED
                ):
                    it = sym.ty  # a plain name, as for Binary's operands
                else:
                    it = self.type_of(index, scope)
                if it is not u32 and it is not i32 and it not in (i32, u32):
                    raise VerifyError(f"{show(e)}: index must be i32 or u32, got {it}")
                # A constant index (a plain name's symbol is at hand: no lookup again).
                if type(index) is ir.Name:
                    cv = self._int_const(index.name, sym) if sym.kind == "const" else None
                    at = None if cv is None else cv[0]
                else:
                    at = self.const_int(index, scope)
                if at is not None and at < 0:
                    self._index_out_of_range(e, at, None)
                if isinstance(base, ir.Name):
                    sym = scope.lookup(base.name)
                    if (
                        sym is not None
                        and sym.kind == "binding"
                        and isinstance(sym.ty, (RuntimeArray, Array, Struct))
                    ):
                        self.used.add(base.name)
                        if isinstance(sym.ty, Struct):
                            raise VerifyError(f"{show(e)}: cannot index a value of type {sym.ty}")
                        if type(sym.ty.elem) is Atomic:
                            self._plain_atomic(e, sym.ty.elem)
                        return sym.ty.elem
                    if (
                        sym is not None
                        and sym.kind == "workgroup"
                        and type(sym.ty) in (Array, Atomic)
                    ):
                        if type(sym.ty) is Atomic:
                            raise VerifyError(f"{show(e)}: cannot index {sym.ty} '{base.name}'")
                        if at is not None and at >= sym.ty.n:
                            self._index_out_of_range(e, at, sym.ty.n)
                        if type(sym.ty.elem) is Atomic:
                            self._plain_atomic(e, sym.ty.elem)
                        return sym.ty.elem
                bt = self.type_of(base, scope)
                if isinstance(bt, (Array, Vec)):
                    if at is not None and at >= bt.n:
                        self._index_out_of_range(e, at, bt.n)
                    return bt.elem
                if type(bt) is Mat:  # m[i]: column i
                    if at is not None and at >= bt.c:
                        self._index_out_of_range(e, at, bt.c)
                    return bt.column
                if isinstance(bt, RuntimeArray) and type(base) in (ir.Deref, ir.Member):
                    return (
                        bt.elem
                    )  # or rows.data[i] of a binding that is one struct  # (*p)[i] of a pointer to a whole binding
                if isinstance(bt, Ptr):
                    raise VerifyError(
                        f"{show(e)}: {show(base)} is a pointer: index what it points at, "
                        f"(*{show(base)})[i]"
                    )
                raise VerifyError(f"{show(e)}: cannot index a value of type {bt}")
            case ir.Call(op, args):
                info = ops.info(op)
                if info.kind != "builtin" or len(args) != info.arity:
                    raise VerifyError(
                        f"{show(e)}: {info.spelling} takes {info.arity} arguments, got {len(args)}"
                    )
                why = shadowing(info.spelling, scope, self.function_names)
                if why is not None:
                    raise VerifyError(f"{show(e)}: {why}")
                got = self._apply(e, op, tuple(self.type_of(a, scope) for a in args))
                if info.subgroup:
                    self.barriers = True  # the uniformity analysis runs (check_barriers)
                if op is _CLAMP:
                    self._clamp_bounds(e, scope)
                if op is Op.TRANSPOSE or op is Op.DETERMINANT:
                    if not self._folding and const_shaped(e, scope.visible):
                        self._const_matrix(e, scope)  # raises where a value is not finite
                    return got
                visible = scope.visible
                if got is f32 or got is f16:
                    if all(maybe_const(x, visible) for x in args):
                        self._const_float(e, scope)
                elif type(got) is Vec and (got.elem is f32 or got.elem is f16):
                    if const_shaped(e, visible):
                        self._const_float_vector(e, scope)  # of float constants: raises
                elif op is Op.PACK2X16FLOAT and const_shaped(e, visible):
                    self._f16_range(e, self._const_num(args[0], scope))
                return got
            case ir.Convert(ty, x):
                src = self.type_of(x, scope)
                ok = (isinstance(ty, Scalar) and isinstance(src, Scalar)) or (
                    isinstance(ty, Vec) and isinstance(src, Vec) and src.n == ty.n
                )
                if type(ty) is Mat and type(src) is Mat and (src.c, src.r) == (ty.c, ty.r):
                    if not self._folding and const_shaped(x, scope.visible):
                        self._const_matrix(e, scope)  # an f16 too small for an element
                    return ty
                if not ok:
                    raise VerifyError(f"{show(e)}: cannot convert {src} to {ty}")
                if (ty is f32 or ty is f16) and maybe_const(x, scope.visible):
                    self._const_float(e, scope)  # an f16 too small for the value, say
                elif type(ty) is Vec and (ty.elem is f32 or ty.elem is f16):
                    if const_shaped(x, scope.visible):
                        self._const_float_vector(e, scope)  # the same, component by component
                return ty
            case ir.Bitcast(ty, x):
                src = self.type_of(x, scope)
                if not (bitcastable(src) and bitcastable(ty) and components(src) == components(ty)):
                    raise VerifyError(
                        f"{show(e)}: bitcast takes a u32, i32 or f32 scalar or vector to one of"
                        f" those with as many components, not {src} to {ty}"
                    )
                return ty
            case ir.Construct(ty, args):
                if not args and isinstance(ty, (Vec, Mat, Array, Struct)):
                    return ty  # the zero value: vec4<f32>(), array<u32, 8>()
                got = [self.type_of(a, scope) for a in args]
                if isinstance(ty, Vec):
                    n = sum(t.n if isinstance(t, Vec) else 1 for t in got)
                    if got == [ty.elem]:
                        n = ty.n  # one scalar: the splat vecN<T>(x)
                    if n != ty.n or any(t.scalar != ty.elem for t in got if hasattr(t, "scalar")):
                        raise VerifyError(f"{show(e)}: components do not make a {ty}")
                    if any(not isinstance(t, (Scalar, Vec)) for t in got):
                        raise VerifyError(f"{show(e)}: components do not make a {ty}")
                elif isinstance(ty, Array):
                    if len(got) != ty.n or any(t != ty.elem for t in got):
                        raise VerifyError(f"{show(e)}: components do not make a {ty}")
                elif type(ty) is Mat:
                    # C columns vecR<T>, or C*R scalars T in column-major order.
                    if got != [ty.column] * ty.c and got != [ty.elem] * (ty.c * ty.r):
                        raise VerifyError(
                            f"{show(e)}: {ty} is built from {ty.c} columns {ty.column} or "
                            f"{ty.c * ty.r} {ty.elem} values, got ({', '.join(map(str, got))})"
                        )
                elif isinstance(ty, Struct):
                    want = [t for _, t in ty.fields]
                    if got and got != want:
                        raise VerifyError(
                            f"{show(e)}: {ty.name} takes ({', '.join(map(str, want))}), got "
                            f"({', '.join(map(str, got))})"
                        )
                else:
                    raise VerifyError(f"{show(e)}: cannot construct {ty}")
                return ty
            case ir.Unary(op, x):
                return self._apply(e, op, (self.type_of(x, scope),))
            case (
                ir.TextureDimensions()
                | ir.TextureLoad()
                | ir.TextureNumLayers()
                | ir.TextureNumSamples()
                | ir.TextureNumLevels()
                | ir.TextureSampleBaseClampToEdge()
                | ir.TextureSampleLevel()
                | ir.TextureSampleCompare()
                | ir.TextureGather()
                | ir.TextureSampleGrad()
            ):
                return self.texture_expr(e, scope)
            case ir.ArrayLength(name, None, True):
                sym = scope.lookup(name)
                ty = None if sym is None else sym.ty
                if not (
                    isinstance(ty, Ptr)
                    and ty.space == "storage"
                    and isinstance(ty.store, RuntimeArray)
                ):
                    raise VerifyError(
                        f"{show(e)}: arrayLength takes a pointer to a runtime-sized array in "
                        f"storage ('{name}' is {'not declared' if ty is None else ty})"
                    )
                return u32
            case ir.ArrayLength(name, member):
                sym = scope.lookup(name)
                if sym is None or sym.kind != "binding":
                    raise VerifyError(f"{show(e)}: '{name}' is not a storage binding")
                if isinstance(sym.ty, Array):  # array<array<u32, 8>, 16>: a fixed size
                    raise VerifyError(
                        f"{show(e)}: arrayLength takes a runtime-sized array ({name} is "
                        f"{sym.ty}, of a fixed size)"
                    )
                whole = isinstance(sym.ty, Struct)
                if member is not None or whole:
                    last = sym.ty.fields[-1] if whole else None
                    if last is None or last[0] != member or not isinstance(last[1], RuntimeArray):
                        raise VerifyError(
                            f"{show(e)}: arrayLength takes a runtime-sized array"
                            + (
                                f" ({name}.{last[0]})"
                                if last and isinstance(last[1], RuntimeArray)
                                else ""
                            )
                        )
                self.used.add(name)
                return u32
            case ir.AtomicCall(fn):
                ret = self.atomic_type(e, scope)
                if ret is None:
                    raise VerifyError(f"{show(e)}: atomic{fn} returns no value (a statement)")
                return ret
            case ir.AddressOf(x):
                return self.pointer_to(e, x, scope)
            case ir.Deref(p):
                pt = self.type_of(p, scope)
                if not isinstance(pt, Ptr):
                    raise VerifyError(f"{show(e)}: '*' takes a pointer, not a {pt}")
                return pt.store
            case ir.UniformLoad(p):
                pt = self.type_of(p, scope)
                if not isinstance(pt, Ptr) or pt.space != "workgroup":
                    raise VerifyError(
                        f"{show(e)}: workgroupUniformLoad takes a pointer into workgroup "
                        f"memory (ptr<workgroup, T>), got {pt}"
                    )
                if holds_atomic(pt.store):
                    raise VerifyError(
                        f"{show(e)}: workgroupUniformLoad of a {pt.store}: its type may hold no "
                        "atomic (atomicLoad reads one)"
                    )
                self.barriers = True  # the uniformity analysis runs (check_barriers)
                return pt.store
            case ir.FnCall(name, args):
                ret = self.call_type(e, scope)
                if ret is None:
                    raise VerifyError(
                        f"{show(e)}: {name} returns no value (call it as a statement)"
                    )
                return ret
        raise VerifyError(f"not an expression: {e!r}")

    def _whole_binding(self, name: str, ty: Type) -> Type:
        """The type of binding ``name`` read whole, as a value: one scalar, vector, struct or
        fixed-size array (``n``, ``cfg``); an array of runtime size, or a type holding an
        atomic or a runtime-sized array, is no value (WGSL's load rule)."""
        if isinstance(ty, Atomic):
            raise VerifyError(
                f"binding '{name}' of type {ty} is read and written only through the atomic "
                f"builtins (atomicLoad(&{name}) ...), not as a plain value"
            )
        if isinstance(ty, RuntimeArray):
            raise VerifyError(f"binding '{name}' used without an index")
        if holds_atomic(ty) or (
            isinstance(ty, Struct) and any(isinstance(t, RuntimeArray) for _, t in ty.fields)
        ):
            what = "an atomic" if holds_atomic(ty) else "a runtime-sized array"
            raise VerifyError(
                f"binding '{name}' of type {ty} holds {what}: it is not read whole, only "
                "member by member"
            )
        self.used.add(name)
        return ty

    def _plain_atomic(self, e: ir.Index, ty: Atomic) -> None:
        raise VerifyError(
            f"{show(e)}: an element of type {ty} is read and written only through the atomic "
            f"builtins (atomicLoad(&{show(e)}), atomicStore(&{show(e)}, v), atomicAdd ...), "
            "not as a plain value"
        )

    def _const_operands(
        self, e: ir.Binary, v: int, scope: Scope, left: tuple[int, Scalar] | None = None
    ) -> None:
        """What WGSL rejects when it compiles a shift or an integer division whose right operand
        is the constant ``v``: a shift by the operand's bit width (32) or more, or a left shift
        of a constant that overflows; a division or remainder by 0, and i32's least value over
        -1. (A float divisor never has an integer value here.) ``left``: the left operand's
        constant where the caller has it (a vector's component), else it is looked up."""
        op = e.op
        if op is _SHL or op is _SHR:
            if v >= 32:
                raise VerifyError(
                    f"{show(e)}: a shift by {v}: integers have 32 bits (give 0 to 31)"
                )
        elif v == 0:
            what = "division" if op is _DIV else "remainder"
            raise VerifyError(f"{show(e)}: an integer {what} by the constant 0")
        elif v == -1 and (left or (self.const_int(e.a, scope),))[0] == -(2**31):
            raise VerifyError(f"{show(e)}: i32's least value over -1 does not fit an i32")
        if op is _SHL and (a := left or self._const(e.a, scope)) is not None:
            if not shl_fits(a[0], v, a[1]):
                raise VerifyError(
                    f"{show(e)}: {a[0]} shifted left by {v} does not fit {a[1]} (WGSL refuses "
                    "a constant shift that overflows)"
                )

    def _const_vector_operands(self, e: ir.Binary, scope: Scope) -> None:
        """:meth:`_const_operands` for an integer vector operation whose right operand is
        built of constants (``vec2<u32>(0u, 1u)``, a splat, a scalar beside a vector), component
        by component, with the left operand's component where it is constant too
        (``vec2<i32>(CM, 1i) / -1i``): WGSL's rules hold per component."""
        right = self._const_num(e.b, scope)
        if right is None:
            return
        left = self._const_num(e.a, scope)
        n = max(len(right), 1 if left is None else len(left))  # a scalar beside the vector
        right = spread(right, n)
        if left is not None:
            left = spread(left, n)
        lt = self.type_of(e.a, scope)  # the left operand's type: a shift's right one is u32
        elem = lt.elem if isinstance(lt, Vec) else lt
        for i, v in enumerate(right):
            self._const_operands(e, int(v), scope, None if left is None else (int(left[i]), elem))

    def _clamp_bounds(self, e: ir.Call, scope: Scope) -> None:
        """WGSL refuses ``clamp(e, low, high)`` with constant bounds, low above high, in any
        component, when it compiles (a swapped QMIN and QMAX, say)."""
        low = self._const_num(e.args[1], scope)
        high = None if low is None else self._const_num(e.args[2], scope)
        if high is not None and any(lo > hi for lo, hi in zip(low, high)):
            raise VerifyError(
                f"{show(e)}: the constant low bound {show(e.args[1])} is above the high bound "
                f"{show(e.args[2])}"
            )

    def _index_out_of_range(self, e: ir.Index, i: int, n: int | None) -> None:
        """WGSL rejects a constant index below 0, or at or past the ``n`` elements of a vector
        or a fixed-size array, when it compiles."""
        allowed = "0 or more" if n is None else f"0 to {n - 1}"
        raise VerifyError(f"{show(e)}: the constant index {i} is out of range (give {allowed})")

    def _apply(self, e: ir.Expr, op: ops.Op, args: tuple[Type, ...]) -> Type:
        try:
            return ops.info(op).typing(args)
        except ops.OpTypeError as err:
            raise VerifyError(f"{show(e)}: {ops.info(op).spelling} {err}") from None
