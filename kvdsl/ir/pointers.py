"""The typing of what is reached through an address: ``&x`` and the address space it points
into, the atomic an atomic builtin's first argument points at, the builtin's operands and
result, and a helper's call with WGSL's alias analysis of its pointer arguments.
"""

from __future__ import annotations

from kvdsl.ir import tree as ir
from kvdsl.ir.consteval import ConstEval
from kvdsl.ir.scope import Scope, VerifyError
from kvdsl.ir.show import show
from kvdsl.ir.types import (
    Array,
    Atomic,
    Ptr,
    RuntimeArray,
    Scalar,
    HANDLES,
    Struct,
    Type,
    Vec,
    compare_exchange_result,
    i32,
    u32,
)


class PointerTyper(ConstEval):
    """Types pointers, atomic builtins and helper calls. A base of
    :class:`~kvdsl.ir.typeof.ExprTyper`, whose :meth:`type_of` and
    :meth:`_index_out_of_range` it calls, and whose ``used``, ``stored`` and ``functions``
    (the bindings read and written, the helpers verified so far) it records into and reads."""

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
                elem = getattr(sym.ty, "elem", None)  # a struct var has none
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
                if sym.kind == "private":
                    return Ptr("private", sym.ty)
                if sym.kind == "params" or sym.kind == "uniform":  # &params, &taps
                    return Ptr("uniform", sym.ty, "read")
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
        want = tuple(t for _, t in fn.params)
        got = tuple(
            (
                self.texture_type(e, a.name, scope)
                if isinstance(t, HANDLES) and type(a) is ir.Name
                else self.type_of(a, scope)
            )
            for a, t in zip(e.args, want + (None,) * len(e.args))
        )
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
