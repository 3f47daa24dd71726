"""The typing of expressions: :meth:`ExprTyper.type_of` derives an expression's type from the
declarations in scope and the op table's typing rules, and refuses what WGSL refuses of an
expression when it compiles (a constant index out of range, a constant shift or division that
is an error, a non-finite float constant: :mod:`kvdsl.ir.consteval` evaluates them).
"""

from __future__ import annotations

from kvdsl.ir import tree as ir
from kvdsl.ir import ops
from kvdsl.ir.consteval import (
    SWIZZLE,
    ConstEval,
    const_shaped,
    literal_ok,
    maybe_const,
    shl_fits,
    spread,
)
from kvdsl.ir.ops import Op
from kvdsl.ir.scope import Scope, VerifyError, shadowing
from kvdsl.ir.show import show
from kvdsl.ir.types import Atomic, compare_exchange_result
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


def _has_atomic(t: Type) -> bool:
    """Whether ``t`` is or holds an ``atomic<T>``."""
    if isinstance(t, Atomic):
        return True
    if isinstance(t, (Array, RuntimeArray)):
        return _has_atomic(t.elem)
    if isinstance(t, Struct):
        return any(_has_atomic(ft) for _, ft in t.fields)
    return False


_INDEXED = frozenset(("binding", "workgroup"))  # kinds of names that are used only indexed
_SHL, _SHR, _DIV, _MOD, _CLAMP = Op.SHL, Op.SHR, Op.DIV, Op.MOD, Op.CLAMP


class ExprTyper(ConstEval):
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
                    if sym is not None and sym.kind == "workgroup":
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
            case ir.AtomicCall(fn, target, args):
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
                if _has_atomic(pt.store):
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
        if _has_atomic(ty) or (
            isinstance(ty, Struct) and any(isinstance(t, RuntimeArray) for _, t in ty.fields)
        ):
            what = "an atomic" if _has_atomic(ty) else "a runtime-sized array"
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

    def atomic_elem(self, target: ir.Expr, scope: Scope, fn: str) -> Scalar:
        """The scalar type (u32 or i32) of the atomic ``target`` names: an element of an
        ``array<atomic<T>>`` storage binding (read_write) or workgroup array."""
        if type(target) is ir.Deref:  # through a pointer: ptr<storage, atomic<u32>, read_write>
            try:
                pt = self.type_of(target.x, scope)
            except VerifyError:
                pt = None  # an atomic element read as a value: c[0]
            if not isinstance(pt, Ptr):
                raise VerifyError(
                    f"atomic{fn}({show(target.x)}): the first argument of atomic{fn} is a "
                    f"pointer to an atomic (&a[i], or a pointer held by a let or a parameter), "
                    f"not a value{'' if pt is None else ' of type ' + str(pt)}"
                )
            if type(pt.store) is Atomic:
                if pt.access != "read_write":
                    raise VerifyError(
                        f"atomic{fn}({show(target.x)}): {show(target.x)} is a {pt}, read-only "
                        "(atomics in storage are read_write)"
                    )
                return pt.store.elem
            raise VerifyError(
                f"atomic{fn}({show(target.x)}): the pointer is not to an atomic<u32> or "
                f"atomic<i32> (a {pt})"
            )
        if type(target) is ir.Name:  # a var<workgroup> atomic of its own, or a binding's
            sym = scope.lookup(target.name)
            if sym is not None and sym.kind == "workgroup" and type(sym.ty) is Atomic:
                return sym.ty.elem
            if sym is not None and sym.kind == "binding" and type(sym.ty) is Atomic:
                self.used.add(target.name)
                if fn != "Load":
                    self.stored.add(target.name)
                return sym.ty.elem
        if type(target) is ir.Index and type(target.base) is ir.Name:
            sym = scope.lookup(target.base.name)
            if sym is not None and sym.kind in ("binding", "workgroup"):
                elem = sym.ty.elem
                if type(elem) is Atomic:
                    it = self.type_of(target.index, scope)
                    if it is not u32 and it is not i32:
                        raise VerifyError(f"{show(target)}: index must be i32 or u32, got {it}")
                    at = self.const_int(target.index, scope)
                    n = sym.ty.n if isinstance(sym.ty, Array) else None  # array<atomic<T>, N>
                    if at is not None and (at < 0 or n is not None and at >= n):
                        self._index_out_of_range(target, at, n)
                    if sym.kind == "binding":
                        if sym.access != "read_write":
                            raise VerifyError(
                                f"atomic{fn}(&{show(target)}): binding '{target.base.name}' is "
                                "read-only (atomics in storage are read_write)"
                            )
                        self.used.add(target.base.name)
                        if fn != "Load":
                            self.stored.add(target.base.name)
                    return elem.elem
        if type(target) in (ir.Member, ir.Index):  # &ctr.done, &tiles[i].count, &ctr.hits[i]
            pt = self.pointer_to(ir.AddressOf(target), target, scope)
            if type(pt.store) is Atomic:
                if pt.access != "read_write":
                    raise VerifyError(
                        f"atomic{fn}(&{show(target)}): {show(target)} is read-only (atomics in "
                        "storage are read_write)"
                    )
                if fn != "Load" and pt.space == "storage":
                    self.stored.add(_target_root(target))
                return pt.store.elem
        raise VerifyError(
            f"atomic{fn}(&{show(target)}): the pointer is not to an atomic<u32> or atomic<i32> "
            "(an element of an array<atomic<T>> in storage or workgroup memory, a struct's "
            "atomic member, or a var<workgroup> or storage binding that is one atomic)"
        )

    def atomic_type(self, e: ir.AtomicCall, scope: Scope) -> Type | None:
        """What atomic builtin ``e`` returns (None: ``atomicStore``, nothing), its operands
        checked: each value argument of the atomic's type."""
        want = ir.ATOMIC_FUNCTIONS.get(e.fn)
        if want is None:
            raise VerifyError(f"{show(e)}: no atomic builtin atomic{e.fn}")
        if len(e.args) != want:
            raise VerifyError(f"{show(e)}: atomic{e.fn} takes {want + 1} arguments")
        elem = self.atomic_elem(e.target, scope, e.fn)
        for a in e.args:
            got = self.type_of(a, scope)
            if got is not elem:
                raise VerifyError(
                    f"{show(e)}: atomic{e.fn} of an atomic<{elem}> takes {elem} values, got {got}"
                )
        if e.fn == "Store":
            return None
        if e.fn == "CompareExchangeWeak":
            return compare_exchange_result(elem)
        return elem

    def pointer_to(self, e: ir.AddressOf, x: ir.Expr, scope: Scope) -> Ptr:
        """The type of ``&x``: a pointer into the address space of ``x``'s root (a ``var`` is
        ``function`` memory, a binding ``storage``, a workgroup array ``workgroup``, ``*p``
        ``p``'s), to the type ``x`` has there. WGSL refuses the address of a value (a ``let``,
        a parameter, a const, a builtin input), of a uniform params field here, and of a
        vector component (``&v.x``, ``&v[i]``)."""
        match x:
            case ir.Name(name):
                sym = scope.lookup(name)
                if sym is None:
                    raise VerifyError(f"{show(e)}: undefined name '{name}'")
                if sym.kind == "var":
                    return Ptr("function", sym.ty)
                if sym.kind == "binding":
                    self.used.add(name)
                    if sym.access == "read_write":
                        self.stored.add(name)  # written through the pointer, as far as notes go
                    return Ptr("storage", sym.ty, sym.access)
                if sym.kind == "workgroup":
                    return Ptr("workgroup", sym.ty)
                raise VerifyError(
                    f"{show(e)}: '{name}' is a {sym.kind}, a value, not memory: only a var, a "
                    "binding or a workgroup var has an address"
                )
            case ir.Deref(p):
                pt = self.type_of(p, scope)
                if not isinstance(pt, Ptr):
                    raise VerifyError(f"{show(e)}: '*' takes a pointer, not a {pt}")
                return pt
            case ir.Index(base, _) | ir.Member(base, _):
                inner = self.pointer_to(e, base, scope)
                if isinstance(inner.store, Vec):
                    raise VerifyError(
                        f"{show(e)}: the address of a vector component (WGSL refuses it: "
                        "point at the whole vector)"
                    )
                if type(x) is ir.Member and isinstance(inner.store, Struct):
                    ft = inner.store.field(x.name)  # &ctr.done, &blocks[i].d
                    if ft is None:
                        fields = ", ".join(n for n, _ in inner.store.fields)
                        raise VerifyError(
                            f"{show(e)}: {inner.store} has no field '{x.name}' ({fields})"
                        )
                    return Ptr(inner.space, ft, inner.access)
                if type(x) is ir.Member:
                    raise VerifyError(f"{show(e)}: {inner.store} has no members")
                if (
                    isinstance(inner.store, (Array, RuntimeArray))
                    and type(inner.store.elem) is Atomic
                ):
                    it = self.type_of(x.index, scope)  # an atomic element: only its address
                    if it is not u32 and it is not i32:
                        raise VerifyError(f"{show(x)}: index must be i32 or u32, got {it}")
                    return Ptr(inner.space, inner.store.elem, inner.access)
                return Ptr(inner.space, self.type_of(x, scope), inner.access)
        raise VerifyError(f"{show(e)}: '&' takes a var, a binding, a workgroup var or an element")

    def call_type(self, e: ir.FnCall, scope: Scope) -> Type | None:
        """What helper call ``e`` returns (None: nothing), its arguments checked."""
        fn = self.functions.get(e.name)
        if fn is None:
            raise VerifyError(f"{show(e)}: undefined function '{e.name}'")
        got = tuple(self.type_of(a, scope) for a in e.args)
        want = tuple(t for _, t in fn.params)
        if got != want:
            raise VerifyError(
                f"{show(e)}: {e.name} takes ({', '.join(map(str, want))}), "
                f"got ({', '.join(map(str, got))})"
            )
        if any(isinstance(t, Ptr) for t in want):
            self._aliasing(e, fn, scope)
        return fn.ret

    def _aliasing(self, e: ir.FnCall, fn: ir.Function, scope: Scope) -> None:
        """WGSL's alias analysis: two pointer arguments into one variable, either written
        through in the callee, and a pointer argument into a module-scope variable the callee
        also names while one of the two accesses writes, are errors (Tint refuses them)."""
        roots = [
            (i, pointer_root(a, scope))
            for i, a in enumerate(e.args)
            if isinstance(fn.params[i][1], Ptr)
        ]
        written = written_params(fn, self.functions)
        for k, (i, r) in enumerate(roots):
            for j, q in roots[k + 1 :]:
                if r is not None and r == q and (i in written or j in written):
                    raise VerifyError(
                        f"{show(e)}: arguments {i + 1} and {j + 1} point into the same "
                        f"variable '{r}' and {fn.name} writes through one (WGSL's alias "
                        "analysis refuses it)"
                    )
            sym = scope.lookup(r) if r is not None else None
            if sym is not None and sym.kind in ("binding", "workgroup"):
                named = {x.name for x in ir.walk(fn.body) if type(x) is ir.Name}
                stores = {_target_root(x.target) for x in ir.walk(fn.body) if type(x) is ir.Assign}
                if r in named and (i in written or r in stores):
                    raise VerifyError(
                        f"{show(e)}: argument {i + 1} points into '{r}', which {fn.name} also "
                        "names, and one of the two writes it (WGSL's alias analysis refuses "
                        "it)"
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


def _target_root(target: ir.Expr) -> str | None:
    while type(target) is ir.Index or type(target) is ir.Member:
        target = target.base
    return target.name if type(target) is ir.Name else None


def pointer_root(e: ir.Expr, scope: Scope) -> str | None:
    """The variable pointer ``e`` points into (a ``let`` of a pointer followed to its
    ``&``), or ``p`` for a pointer parameter ``p``; None where it is not known."""
    match e:
        case ir.AddressOf(x):
            while type(x) is ir.Index or type(x) is ir.Member:
                x = x.base
            if type(x) is ir.Deref:
                return pointer_root(x.x, scope)
            return x.name if type(x) is ir.Name else None
        case ir.Name(name):
            sym = scope.lookup(name)
            if sym is not None and sym.kind == "let" and sym.value is not None:
                return pointer_root(sym.value, scope)
            return name
    return None


def written_params(fn: ir.Function, functions: dict[str, ir.Function]) -> set[int]:
    """The indices of ``fn``'s pointer parameters it writes through (directly, through a
    ``let`` of one, or by passing one to a helper that writes through it)."""
    pointers = {p: i for i, (p, t) in enumerate(fn.params) if isinstance(t, Ptr)}
    via: dict[str, int] = dict(pointers)  # names that hold a pointer from a parameter
    out: set[int] = set()
    for x in ir.walk(fn.body):
        if type(x) is ir.Let and type(x.value) in (ir.Name, ir.AddressOf):
            v = x.value
            while type(v) is not ir.Name:
                v = v.x if type(v) in (ir.AddressOf, ir.Deref) else v.base
                if type(v) not in (ir.Name, ir.AddressOf, ir.Deref, ir.Index, ir.Member):
                    break
            if type(v) is ir.Name and v.name in via:
                via[x.name] = via[v.name]
        elif type(x) is ir.Assign:
            t = x.target
            while type(t) is ir.Index or type(t) is ir.Member:
                t = t.base
            if type(t) is ir.Deref and type(t.x) is ir.Name and t.x.name in via:
                out.add(via[t.x.name])
        elif type(x) is ir.FnCall and x.name in functions and x.name != fn.name:
            callee = functions[x.name]
            inner = written_params(callee, functions)
            for k, a in enumerate(x.args):
                root = a.x if type(a) is ir.AddressOf else a
                while type(root) in (ir.Index, ir.Member, ir.Deref):
                    root = root.x if type(root) is ir.Deref else root.base
                if k in inner and type(root) is ir.Name and root.name in via:
                    out.add(via[root.name])
    return out
