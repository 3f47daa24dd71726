"""Constant evaluation: the value WGSL gives a const-expression when it compiles, and what it
refuses of one.

WGSL evaluates an expression of literals and module consts when it compiles the module, and
refuses the module where a step of it is an error there: an integer division by 0, a shift by
32 or more, a left shift that overflows, a float past its type's range or not finite, a
builtin's argument outside its domain. Each step is evaluated by the op table's
implementation (:data:`kvdsl.ir.ops.TABLE`, the interpreter's), on numpy values of the
operand's type (:mod:`kvdsl.ir.conststeps`); what is checked here is only what WGSL refuses of a constant and a running
kernel does not (the range a step leaves before it wraps or rounds).
"""

from __future__ import annotations

import numpy as np

from kvdsl.ir import tree as ir
from kvdsl.ir import ops
from kvdsl.ir.conststeps import (
    F16_MAX,
    FLOAT_MAX,
    float_of,
    float_step,
    fold_int,
    int_step,
    same_bits,
)
from kvdsl.ir.ops import Op
from kvdsl.ir.scope import Scope, Symbol, VerifyError
from kvdsl.ir.show import show
from kvdsl.ir.types import Array, Mat, Scalar, Struct, Vec, bool_, f16, f32, i32, u32

SWIZZLE = "xyzw"
_COMPONENT = {c: i for i, c in enumerate(SWIZZLE)}
_NEG, _SELECT, _BITNOT = Op.NEG, Op.SELECT, Op.BITNOT
#: The integer builtins the folder evaluates (and ``select`` on a literal condition).
_INT_BUILTINS = frozenset((Op.MIN, Op.MAX, Op.ABS, Op.CLAMP))
#: The float operators the folder evaluates (:func:`float_step`).
_FLOAT_STEPS = frozenset((Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.MOD))
#: The float builtins the folder evaluates (:meth:`ConstEval._float_call`).
_FLOAT_BUILTINS = frozenset(
    (Op.ROUND, Op.FLOOR, Op.CEIL, Op.TRUNC, Op.SQRT, Op.INVERSE_SQRT, Op.EXP, Op.LOG, Op.COS,
     Op.SIN, Op.ABS, Op.MIN, Op.MAX, Op.CLAMP, Op.FMA)
)  # fmt: skip
# Builtins whose argument has a bound: True, above 0; False, 0 or more.
_FLOAT_DOMAIN = {Op.LOG: True, Op.INVERSE_SQRT: True, Op.SQRT: False}


def maybe_const(e: ir.Expr, visible: dict[str, Symbol]) -> bool:
    """Whether ``e`` may be a constant (not a let, a var or another runtime name)."""
    return type(e) is not ir.Name or visible[e.name].kind == "const"


def const_shaped(e: ir.Expr, visible: dict[str, Symbol]) -> bool:
    """Whether ``e`` is built of literals and module consts only (no load, let, var or
    builtin value): a cheap test before a vector's constants are folded."""
    t = type(e)
    if t is ir.Lit:
        return True
    if t is ir.Name:
        sym = visible.get(e.name)
        return sym is not None and sym.kind == "const"
    if t is ir.Construct or t is ir.Call:
        return all(const_shaped(a, visible) for a in e.args)
    if t is ir.Unary or t is ir.Convert or t is ir.Bitcast:
        return const_shaped(e.x, visible)
    if t is ir.Binary:
        return const_shaped(e.a, visible) and const_shaped(e.b, visible)
    if t is ir.Member:
        return const_shaped(e.base, visible)
    if t is ir.Index:
        return const_shaped(e.base, visible) and const_shaped(e.index, visible)
    return False


def _picked(e: ir.Call) -> ir.Expr | None:
    """The arm a ``select`` on a literal condition takes (``select(f, t, true)`` is ``t``), or
    None where the condition is not a literal."""
    cond = e.args[2]
    if type(cond) is not ir.Lit or type(cond.value) is not bool:
        return None
    return e.args[1] if cond.value else e.args[0]


def spread(parts: tuple, n: int) -> tuple:
    """A scalar's components beside an ``n``-vector: the one value ``n`` times."""
    return parts * n if len(parts) == 1 else parts


def literal_ok(value: object, ty: Scalar) -> bool:
    """Whether ``value`` is representable as a literal of ``ty``."""
    if ty is u32:  # the common cases first, without comparing types by value
        return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**32
    if ty is i32:
        return isinstance(value, int) and not isinstance(value, bool) and -(2**31) <= value < 2**31
    if ty == bool_:
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if ty == u32:
        return isinstance(value, int) and 0 <= value < 2**32
    if ty == i32:
        return isinstance(value, int) and -(2**31) <= value < 2**31
    if not isinstance(value, (int, float)):
        return False
    key = (ty.name, type(value), value)  # True and 1 never get here; -0.0 and 0.0 agree
    if key in _FINITE:
        return True
    with np.errstate(over="ignore"):
        ok = bool(np.isfinite(ty.dtype.type(value)))
    if ok and len(_FINITE) < _FINITE_MAX:
        _FINITE.add(key)
    return ok


# (type name, value's type, value) of the float literals found finite: numpy's errstate and
# conversion cost microseconds per literal, and the builder and the verifier both ask.
_FINITE: set[tuple[str, type, object]] = set()
_FINITE_MAX = 4096


class ConstEval:
    """Folds the const-expressions of a kernel, module consts once each. A mixin of the
    :class:`~kvdsl.ir.verify.Verifier`, whose :meth:`type_of` it calls."""

    def __init__(self) -> None:
        # Set while a matrix const-expression is folded: typing its parts folds nothing again.
        self._folding = False
        # Module consts folded on demand, by name: integer (value, type) (:meth:`_const`) and
        # float values (:meth:`_const_float`); None where one is not a constant of that kind.
        self.const_values: dict[str, tuple[int, Scalar] | None] = {}
        self.const_floats: dict[str, np.floating | None] = {}
        self.module: Scope | None = None  # the scope module consts are folded in

    def _int_const(self, name: str, sym: Symbol) -> tuple[int, Scalar] | None:
        """A module const's integer value and type (folded once, in the module's scope)."""
        if name not in self.const_values:
            self.const_values[name] = self._const(sym.value, self.module)
        return self.const_values[name]

    def float_const(self, name: str, sym: Symbol) -> np.floating | None:
        """A module const's float value (folded once, in the module's scope)."""
        if name not in self.const_floats:
            self.const_floats[name] = self._const_float(sym.value, self.module)
        return self.const_floats[name]

    def _struct_part(self, e: ir.Expr, scope: Scope) -> tuple[ir.Expr, Scope] | None:
        """The expression a part of a constant struct is (``R.lo`` of ``const R = Range(3u,
        9u);`` is ``3u``, ``Range().lo`` the zero ``0u``, ``T.w[1]``, ``T.bias.x``) and the
        scope it is folded in; None where ``e`` is not reached through a struct's member."""
        got = self._part(e, scope)
        return None if got is None or not got[2] else got[:2]

    def _part(self, e: ir.Expr, scope: Scope) -> tuple[ir.Expr, Scope, bool] | None:
        """:meth:`_struct_part`, and whether a struct's member was taken on the way."""
        if type(e) is ir.Name:
            sym = scope.visible.get(e.name)
            if sym is None or sym.kind != "const" or type(sym.value) is not ir.Construct:
                return None
            return sym.value, self.module, False
        if type(e) is ir.Construct:
            return e, scope, False
        if type(e) is not ir.Member and type(e) is not ir.Index:
            return None
        got = self._part(e.base, scope)
        if got is not None and type(got[0]) is ir.Name:  # Eq(BANDS, 7u).bands: BANDS's value
            named = self._part(got[0], got[1])
            got = None if named is None else (named[0], named[1], got[2])
        if got is None or type(got[0]) is not ir.Construct:
            return None
        base, at, through = got
        ty, args = base.ty, base.args
        if type(e) is ir.Member and isinstance(ty, Struct):
            names = [n for n, _ in ty.fields]
            if e.name not in names:
                return None
            k, through = names.index(e.name), True
        elif type(e) is ir.Member and isinstance(ty, Vec) and len(e.name) == 1:
            k = _COMPONENT[e.name]
        elif type(e) is ir.Index and isinstance(ty, (Vec, Array)):
            k = self.const_int(e.index, scope)
            if k is None or not 0 <= k < ty.n:
                return None
        else:
            return None
        if args and len(args) != (len(ty.fields) if isinstance(ty, Struct) else ty.n):
            return None  # a splat, or a vector of vectors: folded elsewhere
        if args:
            return args[k], at, through
        part = ty.fields[k][1] if isinstance(ty, Struct) else ty.elem  # the zero value's
        if isinstance(part, Scalar):
            return ir.Lit(False if part is bool_ else 0 if part.is_int else 0.0, part), at, through
        return ir.Construct(part, ()), at, through

    def const_int(self, e: ir.Expr, scope: Scope) -> int | None:
        """The value of ``e`` where it is a u32 or i32 const-expression WGSL evaluates when it
        compiles (literals, module consts and arithmetic of them), else None. ``+``, ``-``,
        ``*`` and negation wrap modulo 2**32 as WGSL says (:func:`~kvdsl.ir.conststeps.int_step`); another step past
        the type's range (a left shift, i32's least value over -1) gives None, its own check
        refusing it where it stands."""
        got = self._const(e, scope)
        return None if got is None else got[0]

    def _const(self, e: ir.Expr, scope: Scope) -> tuple[int, Scalar] | None:
        """:meth:`const_int` with the value's type."""
        t = type(e)
        if (t is ir.Member or t is ir.Index) and (part := self._struct_part(e, scope)):
            return self._const(*part)  # a member of a constant struct: C.a
        if t is ir.Lit:
            ty = e.ty
            return (e.value, ty) if (ty is u32 or ty is i32) and type(e.value) is int else None
        if t is ir.Name:
            sym = scope.visible.get(e.name)
            return self._int_const(e.name, sym) if sym is not None and sym.kind == "const" else None
        if t is ir.Binary:
            a = self._const(e.a, scope)
            b = None if a is None else self._const(e.b, scope)
            if b is None:
                return None
            ty = a[1]
            v = fold_int(e.op, a[0], b[0], ty)
        elif t is ir.Unary and (e.op is _NEG or e.op is _BITNOT):
            a = self._const(e.x, scope)
            if a is None:
                return None
            ty = a[1]
            v = int_step(e.op, ty, a[0])
        elif t is ir.Member and len(e.name) == 1:
            # One component of a vector const-expression: vec2<u32>(0u, 8u).y is 8u to WGSL.
            if not const_shaped(e.base, scope.visible):  # cfg.n of a binding: no constant
                return None
            base = self.type_of(e.base, scope)
            if not isinstance(base, Vec) or not (base.elem is u32 or base.elem is i32):
                return None
            parts = self._const_num(e.base, scope)
            if parts is None:
                return None
            return int(parts[_COMPONENT[e.name]]), base.elem
        elif t is ir.Call and e.op is _SELECT:
            arm = _picked(e)
            return None if arm is None else self._const(arm, scope)
        elif t is ir.Call and e.op in _INT_BUILTINS:
            args = [self._const(x, scope) for x in e.args]
            if any(a is None for a in args):
                return None
            ty = args[0][1]
            v = int_step(e.op, ty, *(a[0] for a in args))  # type: ignore[index]
        elif t is ir.Convert and (e.ty is u32 or e.ty is i32):
            a = self._const(e.x, scope)
            if a is None:
                return None
            v, ty = same_bits(a[0], e.ty), e.ty
        else:
            return None
        return None if v is None else (v, ty)

    def _const_num(self, e: ir.Expr, scope: Scope) -> tuple[int | float, ...] | None:
        """The components of ``e`` (one for a scalar) where it is a constant: an integer
        const-expression (:meth:`const_int`), a float literal or const, its negation, or a vector
        built of such; else None."""
        t = type(e)
        if (t is ir.Member or t is ir.Index) and (part := self._struct_part(e, scope)):
            return self._const_num(*part)  # a member of a constant struct: C.a
        if t is ir.Construct:
            args = e.args
            if not args:  # the zero value
                return (0,) * e.ty.n if isinstance(e.ty, Vec) else None
            if len(args) > 1 and all(x is args[0] for x in args):  # a splat: one value
                args = args[:1]
            parts = [self._const_num(a, scope) for a in args]
            if any(p is None for p in parts):
                return None
            flat = tuple(x for p in parts for x in p)  # type: ignore[union-attr]
            return flat * e.ty.n if len(args) == 1 and len(flat) == 1 else flat
        if t is ir.Call and e.op is _SELECT:
            arm = _picked(e)
            return None if arm is None else self._const_num(arm, scope)
        if t is ir.Call or t is ir.Convert:
            got = self._const_float_vector(e, scope)
            if got is not None:
                return got
        if t is ir.Binary and e.op in _FLOAT_STEPS:  # float vectors, component by component
            a = self._const_num(e.a, scope)
            b = None if a is None else self._const_num(e.b, scope)
            if b is None:
                return None
            if (len(a) > 1 or len(b) > 1) and all(isinstance(x, np.floating) for x in a + b):
                n, dtype = max(len(a), len(b)), type(a[0])
                pairs = zip(spread(a, n), spread(b, n))
                return tuple(self._step(e, e.op, dtype(x), dtype(y)) for x, y in pairs)
        if t in (ir.Unary, ir.Binary, ir.Member, ir.Call, ir.Convert):
            ty = self.type_of(e, scope)
            if isinstance(ty, Vec) and ty.elem.is_int:  # None where a step leaves the range
                return self._const_int_vector(e, scope)
        if t is ir.Unary and e.op is _NEG and type(e.x) is ir.Construct:  # -vec4<f32>(...)
            p = self._const_num(e.x, scope)
            return None if p is None else tuple(-x for x in p)
        v = self.const_int(e, scope)
        if v is None:
            v = self._const_float(e, scope)
        return None if v is None else (v,)

    def _const_matrix(self, e: ir.Expr, scope: Scope) -> np.ndarray | None:
        """The value of a float const-expression that holds matrices (``mat2x2<f32>(...) *
        2.0``, ``transpose(m)``, ``determinant(m)``, ``m[i][j]``), shaped as the interpreter
        holds values (``[1]``, ``[1, N]``, ``[1, C, R]``) and computed by the op table, else None.
        Raises where a value is not finite, as WGSL refuses such a constant when it compiles."""
        if self._folding:  # typing the operands below: type_of must not fold them again
            ty = self.type_of(e, scope)
        elif not const_shaped(e, scope.visible):
            return None
        else:
            self._folding = True
            try:
                return self._const_matrix(e, scope)
            finally:
                self._folding = False
        t = type(e)
        if t is ir.Construct and type(ty) is Mat:
            if not e.args:
                return np.zeros((1, ty.c, ty.r), ty.elem.dtype)
            parts = [self._const_matrix(a, scope) for a in e.args]
            if any(p is None for p in parts):
                return None
            v = np.stack([p.reshape(-1) for p in parts]).reshape(1, ty.c, ty.r)
            return v.astype(ty.elem.dtype)
        if t is ir.Binary and e.op in (Op.ADD, Op.SUB, Op.MUL):
            a, b = self._const_matrix(e.a, scope), self._const_matrix(e.b, scope)
            if a is None or b is None:
                return None
            with np.errstate(all="ignore"):
                v = ops.TABLE[e.op].impl(a, b)
        elif t is ir.Call and e.op in (Op.TRANSPOSE, Op.DETERMINANT):
            m = self._const_matrix(e.args[0], scope)
            if m is None:
                return None
            with np.errstate(all="ignore"):
                v = ops.TABLE[e.op].impl(m)
        elif t is ir.Convert and type(ty) is Mat:  # mat2x2<f16>(m): each element rounded
            m = self._const_matrix(e.x, scope)
            if m is None:
                return None
            with np.errstate(all="ignore"):
                v = m.astype(ty.elem.dtype)
        elif t is ir.Name and type(ty) is Mat:  # a module const matrix
            sym = scope.visible.get(e.name)
            if sym is None or sym.kind != "const" or sym.value is None:
                return None
            return self._const_matrix(sym.value, self.module or scope)
        elif t is ir.Index:
            base, i = self._const_matrix(e.base, scope), self.const_int(e.index, scope)
            if base is None or i is None:
                return None
            return base[:, i]
        elif t is ir.Member and len(e.name) == 1:  # one component of a constant vector
            base = self._const_matrix(e.base, scope)
            return None if base is None or base.ndim != 2 else base[:, "xyzw".index(e.name)]
        elif isinstance(ty, (Scalar, Vec)) and ty.scalar.is_float:
            parts = self._const_num(e, scope)
            if parts is None:
                return None
            return np.array(parts, ty.scalar.dtype).reshape((1, -1) if type(ty) is Vec else 1)
        else:
            return None
        if not np.all(np.isfinite(v)):
            raise VerifyError(
                f"{show(e)}: the constant is not finite in {ty.scalar}: WGSL refuses a constant "
                "that is not finite when it compiles"
            )
        return v

    def _const_int_vector(self, e: ir.Expr, scope: Scope) -> tuple[int, ...] | None:
        """The components of an integer vector const-expression of operators (``~``, ``-``, the
        arithmetic and bitwise ones, a swizzle) on vectors of constants, as WGSL evaluates it
        when it compiles; None where ``e`` is not one, or a step other than ``+``, ``-``, ``*``
        and negation (which wrap, as for scalars) leaves the type's range."""
        ty = self.type_of(e, scope)
        if not isinstance(ty, Vec) or not ty.elem.is_int:
            return None
        elem = ty.elem
        t = type(e)
        if t is ir.Unary and (e.op is _NEG or e.op is _BITNOT):
            x = self._const_num(e.x, scope)
            if x is None:
                return None
            got = tuple(int_step(e.op, elem, int(v)) for v in x)
        elif t is ir.Binary:
            a, b = self._const_num(e.a, scope), self._const_num(e.b, scope)
            if a is None or b is None:
                return None
            pairs = zip(spread(a, ty.n), spread(b, ty.n))
            got = tuple(fold_int(e.op, int(x), int(y), elem) for x, y in pairs)  # type: ignore
        elif t is ir.Member:
            base = self._const_num(e.base, scope)
            if base is None:
                return None
            got = tuple(int(base[_COMPONENT[c]]) for c in e.name)
        elif t is ir.Call and e.op in _INT_BUILTINS:  # component by component
            args = [self._const_num(a, scope) for a in e.args]
            if any(a is None for a in args):
                return None
            wide = [spread(a, ty.n) for a in args]  # type: ignore[arg-type]
            got = tuple(int_step(e.op, elem, *(int(a[i]) for a in wide)) for i in range(ty.n))
        elif t is ir.Convert:  # between vec<u32> and vec<i32> WGSL keeps the bits
            x = self._const_num(e.x, scope)
            if x is None or not all(type(v) is int for v in x):
                return None
            got = tuple(same_bits(int(v), elem) for v in spread(x, ty.n))
        else:
            return None
        return None if None in got else got  # type: ignore[return-value]

    def _const_float(self, e: ir.Expr, scope: Scope) -> np.floating | None:
        """The value of ``e`` where it is a scalar f32 or f16 const-expression (literals, float
        consts, integer constants converted, arithmetic and builtins of them), in its type's
        precision, else None. Raises where WGSL would refuse it when it compiles: a constant
        that is not finite, or a builtin's argument outside its domain."""
        t = type(e)
        if (t is ir.Member or t is ir.Index) and (part := self._struct_part(e, scope)):
            return self._const_float(*part)  # a member of a constant struct: C.a
        if t is ir.Lit:
            ty = e.ty
            return float_of(e.value, ty) if ty is f32 or ty is f16 else None
        if t is ir.Name:
            sym = scope.visible.get(e.name)
            return (
                self.float_const(e.name, sym) if sym is not None and sym.kind == "const" else None
            )
        if t is ir.Unary:
            x = self._const_float(e.x, scope) if e.op is _NEG else None
            return None if x is None else -x
        if t is ir.Convert:
            if not (e.ty is f32 or e.ty is f16):
                return None
            i = self.const_int(e.x, scope)
            if i is None and type(e.x) is ir.Lit and type(e.x.value) is bool:
                i = int(e.x.value)  # f32(true) is 1.0
            x = self._const_float(e.x, scope) if i is None else i
            if x is None:
                return None
            if e.ty is f16 and abs(float(x)) > F16_MAX:  # Tint's rule: no rounding down to it
                raise VerifyError(
                    f"{show(e)}: the constant {x} is past f16's largest value, {F16_MAX:g}: "
                    "WGSL refuses it when it compiles"
                )
            with np.errstate(all="ignore"):
                v = e.ty.dtype.type(x)
        elif t is ir.Binary:
            a = self._const_float(e.a, scope) if e.op in _FLOAT_STEPS else None
            b = None if a is None else self._const_float(e.b, scope)
            if b is None:
                return None
            v = self._step(e, e.op, a, b)
        elif t is ir.Call and e.op is _SELECT:
            arm = _picked(e)
            return None if arm is None else self._const_float(arm, scope)
        elif (t is ir.Call and e.op is Op.DETERMINANT) or (
            (t is ir.Index or t is ir.Member and len(e.name) == 1)
            and isinstance(self.type_of(e, scope), Scalar)
        ):  # determinant(m), m[i][j], v[i], v.y of constants
            got = self._const_matrix(e, scope)
            return None if got is None else got.reshape(-1)[0]
        elif t is ir.Call and e.op is Op.DOT:  # products, then their sum, step by step
            a, b = self._const_num(e.args[0], scope), self._const_num(e.args[1], scope)
            if a is None or b is None or not all(isinstance(x, np.floating) for x in a + b):
                return None
            v = self._step(e, Op.MUL, a[0], b[0])
            for x, y in zip(a[1:], b[1:]):
                v = self._step(e, Op.ADD, v, self._step(e, Op.MUL, x, y))
        elif t is ir.Call:
            if e.op not in _FLOAT_BUILTINS:
                return None
            args = []
            for x in e.args:
                c = self._const_float(x, scope)
                if c is None:
                    return None
                args.append(c)
            return self._float_call(e, args)
        else:
            return None
        if not np.isfinite(v):
            raise VerifyError(
                f"{show(e)}: the constant is {v} in {type(v).__name__}: WGSL refuses a constant "
                "that is not finite when it compiles"
            )
        return v

    def _const_float_vector(self, e: ir.Call | ir.Convert, scope: Scope) -> tuple | None:
        """The components of a float vector builtin or conversion of constants (``sqrt(vec2<f32>(
        -1.0f, 1.0f))``, ``vec2<f16>(vec2<f32>(70000.0f))``, ``unpack2x16float(0x7c00u)``), each
        checked as a scalar one is; None where ``e`` is no such vector."""
        if type(e) is ir.Convert:
            ty = e.ty
            if type(ty) is not Vec or not (ty.elem is f32 or ty.elem is f16):
                return None
            x = self._const_num(e.x, scope)
            if x is None:
                return None
            if ty.elem is f16:
                self._f16_range(e, x)
            with np.errstate(all="ignore"):
                return tuple(ty.elem.dtype.type(v) for v in spread(x, ty.n))
        if e.op is Op.UNPACK2X16FLOAT:
            word = self.const_int(e.args[0], scope)
            if word is None:
                return None
            halves = Op.UNPACK2X16FLOAT._row.impl(np.uint32(word))
            for h in halves:
                if not np.isfinite(h):
                    raise VerifyError(
                        f"{show(e)}: the constant is {h} in float16: WGSL refuses a constant "
                        "that is not finite when it compiles"
                    )
            return tuple(halves)
        if e.op not in _FLOAT_BUILTINS:
            return None
        parts = []
        for a in e.args:
            p = self._const_num(a, scope)
            if p is None or not all(isinstance(v, np.floating) for v in p):
                return None
            parts.append(p)
        n = max(len(p) for p in parts)
        if n == 1:
            return None  # a scalar: _const_float's
        wide = [spread(p, n) for p in parts]
        return tuple(self._float_call(e, [w[i] for w in wide]) for i in range(n))

    def _f16_range(self, e: ir.Expr, values: tuple | None) -> None:
        """WGSL refuses a constant converted to f16 (or packed into one) past f16's largest
        value; Tint refuses 65,519 too, which would round to 65,504."""
        for x in values or ():
            if abs(float(x)) > F16_MAX:
                raise VerifyError(
                    f"{show(e)}: the constant {x} is past f16's largest value, {F16_MAX:g}: "
                    "WGSL refuses it when it compiles"
                )

    def _float_call(self, e: ir.Call, args: list) -> np.floating:
        """A float builtin of constant arguments (one component), as WGSL evaluates it when it
        compiles: an argument outside the builtin's domain or a result that is not finite is
        refused; ``fma`` goes step by step as Tint takes it."""
        low = _FLOAT_DOMAIN.get(e.op)
        if low is not None and not (args[0] > 0 if low else args[0] >= 0):
            raise VerifyError(
                f"{show(e)}: the constant argument {args[0]} is outside "
                f"{ops.info(e.op).spelling}'s domain (give "
                f"{'more than 0' if low else '0 or more'}): WGSL refuses it when it compiles"
            )
        if e.op is Op.FMA:  # a * b, then + c, each step as Tint takes it
            return self._step(e, Op.ADD, self._step(e, Op.MUL, args[0], args[1]), args[2])
        with np.errstate(all="ignore"):
            v = e.op._row.impl(*args)
        if not np.isfinite(v):
            raise VerifyError(
                f"{show(e)}: the constant is {v} in {type(v).__name__}: WGSL refuses a constant "
                "that is not finite when it compiles"
            )
        return v

    def _step(self, e: ir.Expr, op: Op, a: np.floating, b: np.floating) -> np.floating:
        """:func:`float_step`, its refusal naming ``e``."""
        try:
            return float_step(op, a, b)
        except ValueError as err:
            v, dtype = err.args[0], type(a)
        of = " (the quotient of its %)" if op is Op.MOD else ""
        if not np.isfinite(v):
            raise VerifyError(
                f"{show(e)}: the constant{of} is {dtype(v)} in {dtype.__name__}: WGSL refuses a "
                "constant that is not finite when it compiles"
            )
        name = "f16" if dtype is np.float16 else "f32"
        raise VerifyError(
            f"{show(e)}: the constant{of} {v:.9g} is past {name}'s largest value, "
            f"{FLOAT_MAX[dtype]:.9g} (before rounding): WGSL refuses it when it compiles"
        )
