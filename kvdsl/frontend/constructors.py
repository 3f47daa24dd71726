"""WGSL's value constructors as the typer reads them (:class:`Constructors`, a part of
:class:`kvdsl.frontend.typer.Typer`): ``T(e)`` conversions, ``vecN<T>(...)`` and ``vecN(...)``,
``array<T, N>(...)`` and ``array(...)``, ``matCxR<T>(...)`` and ``matCxR(...)``, ``S(a, b)``,
and the zero values."""

from __future__ import annotations

from kvdsl.frontend.abstract import abstract_kind, is_abstract, widest
from kvdsl.frontend.records import ArrayShape, MatShape, RawCtor, RawLit, VecShape
from kvdsl.ir import tree as ir
from kvdsl.ir.scope import Scope
from kvdsl.ir.types import Array, Mat, Scalar, Struct, Vec, bool_, f16, f32, i32


class Constructors:
    """The :class:`kvdsl.frontend.typer.Typer`'s constructors, over its ``expr``,
    ``type_of``, ``resolve`` and ``error``."""

    def struct_ctor(self, st: Struct, args: tuple[ir.Expr, ...], scope: Scope) -> ir.Construct:
        """``S(a, b)``, one argument per member in order, each typed as its member; ``S()`` is
        the zero value."""
        if args and len(args) != len(st.fields):
            names = ", ".join(n for n, _ in st.fields)
            raise self.error(
                f"{st.name}(...) takes {len(st.fields)} arguments ({names}) or none, "
                f"got {len(args)}"
            )
        return ir.Construct(st, tuple(self.expr(a, scope, t) for a, (_, t) in zip(args, st.fields)))

    def inferred(
        self, shape: VecShape | ArrayShape, args: tuple[ir.Expr, ...], scope: Scope, want
    ) -> Vec | Array:
        """The type ``vecN(...)`` or ``array(...)`` builds, as WGSL infers it: of the first
        concrete argument's element (its scalar, for a vector), the abstract ones converted to
        it; of abstract arguments alone (``vecN()`` too), the type the context wants where they
        convert to it, else i32 (f32 where a float is among them)."""
        what = f"vec{shape.n}" if isinstance(shape, VecShape) else "array"
        if not args and isinstance(shape, VecShape):  # the zero value: abstract-int's
            s = want.scalar if isinstance(want, (Scalar, Vec)) else None
            return Vec(shape.n, s if s is not None and s.is_numeric else i32)
        if not args:
            raise self.error("array(): cannot infer the element type without arguments")
        elem = None
        for a in args:
            if abstract_kind(a) is None:
                elem = self.type_of(self.expr(a, scope, None), scope)
                break
        if isinstance(shape, VecShape):
            inner = want.scalar if isinstance(want, (Scalar, Vec)) else None
            if elem is not None:
                elem = elem.scalar if isinstance(elem, (Scalar, Vec)) else elem
        else:
            inner = want.elem if isinstance(want, Array) else None
        if elem is None:
            kind = widest([abstract_kind(a) for a in args])
            scalar = inner.scalar if isinstance(inner, (Scalar, Vec)) else None
            ok = scalar is not None and (scalar.is_float or kind == "int" and scalar.is_numeric)
            elem = inner if ok else (f32 if kind == "float" else i32)
            if isinstance(shape, VecShape):
                elem = elem.scalar if isinstance(elem, (Scalar, Vec)) else elem
            elif isinstance(elem, Scalar) and args and isinstance(args[0], RawCtor):
                # array(vec2(1, 2), ...): of the vectors the arguments build
                first = self.type_of(self.expr(args[0], scope, None), scope)
                elem = Vec(first.n, elem) if isinstance(first, Vec) else first
        if isinstance(shape, VecShape):
            if not isinstance(elem, Scalar):
                raise self.error(f"{what}(...) of {elem}: a vector's components are scalars")
            return Vec(shape.n, elem)
        return Array(elem, len(args))

    def ctor(
        self, ty: Scalar | Vec | Array, args: tuple[ir.Expr, ...], scope: Scope, want=None
    ) -> ir.Expr:
        if isinstance(ty, (VecShape, ArrayShape)):
            ty = self.inferred(ty, args, scope, want)
        if isinstance(ty, (Mat, MatShape)):
            return self.mat_ctor(ty, args, scope)
        if isinstance(ty, Array):
            ty = self.resolve(ty)  # array<R, 2>(R(1u), R(2u))
            return ir.Construct(ty, tuple(self.expr(a, scope, ty.elem) for a in args))
        if len(args) == 1:
            (a,) = args
            # The emitter spells i32's minimum i32(-2147483648): read it back as the literal.
            if ty == i32 and a == RawLit(-(2**31), None, True):
                return ir.Lit(-(2**31), i32)
            a = self.expr(a, scope, ty)
            if isinstance(ty, Scalar) or isinstance(self.type_of(a, scope), Vec):
                return ir.Convert(ty, a)
            return ir.Construct(ty, (a,))
        if isinstance(ty, Scalar) and not args:
            return ir.Lit(False if ty == bool_ else ty.dtype.type(0).item(), ty)  # f32() is 0
        if isinstance(ty, Scalar):
            raise self.error(f"{ty}(...) takes one argument, got {len(args)}")
        return ir.Construct(ty, tuple(self.expr(a, scope, ty.elem) for a in args))

    def mat_ctor(self, ty: Mat | MatShape, args: tuple[ir.Expr, ...], scope: Scope) -> ir.Expr:
        """``matCxR<T>(...)``: no arguments (the zero value), C column vectors, or C*R scalars
        in column-major order; ``matCxR(...)`` takes T from its arguments (abstract ones make
        f32). One matrix argument of the same shape is that matrix (of another element type,
        a conversion, which the subset leaves out)."""
        if isinstance(ty, MatShape):
            if not args:
                raise self.error(f"mat{ty.c}x{ty.r}() needs arguments to infer its element type")
            elem = f32
            for a in args:
                if not is_abstract(a):
                    elem = self.type_of(self.expr(a, scope, None), scope).scalar
                    break
            if elem not in (f32, f16):
                raise self.error(f"mat{ty.c}x{ty.r}(...) of {elem}: a matrix holds f32 or f16")
            ty = Mat(ty.c, ty.r, elem)
        if len(args) == 1:
            a = self.expr(args[0], scope, ty)
            at = self.type_of(a, scope)
            if isinstance(at, Mat) and (at.c, at.r) == (ty.c, ty.r):
                if at.elem != ty.elem:  # mat2x2<f32>(m) of a mat2x2<f16>: each element
                    return ir.Convert(ty, a)
                return a
            args = (a,)
        want = ty.column if len(args) == ty.c else ty.elem
        return ir.Construct(ty, tuple(self.expr(a, scope, want) for a in args))
