"""Assignments the typer rewrites into the IR's plain ones: a swizzle assignment (one
assignment a component, its indices hoisted so a call runs once), a ``for`` loop whose header
holds one (the loop as WGSL defines it), and the phony assignment ``_ = e``."""

from __future__ import annotations

from kvdsl.frontend.errors import WgslTypeError
from kvdsl.frontend.records import RawAddress
from kvdsl.ir import tree as ir
from kvdsl.ir.ops import Op
from kvdsl.ir.scope import Scope
from kvdsl.ir.show import show as value_text
from kvdsl.ir.types import Array, Mat, Ptr, Scalar, Struct, Type, Vec, u32

RGBA = frozenset("rgba")
XYZW = frozenset("xyzw")
RGBA_AS_XYZW = str.maketrans("rgba", "xyzw")


def _calls(e: ir.Expr) -> bool:
    """Whether ``e`` calls a helper function."""
    return any(type(node) is ir.FnCall for node in ir.walk(e))


def hoisted(target: ir.Expr, value: ir.Expr, scope: Scope) -> bool:
    """Whether an assignment's ``target`` takes its indices into lets before ``value`` is
    evaluated, as WGSL evaluates the reference first: where it calls a helper (once), or where
    the value does and an index reads memory the call may change."""
    return (
        _calls(target)
        or _calls(value)
        and any(
            type(node) is ir.Index and not _fixed(node.index, scope, value)
            for node in ir.walk(target)
        )
    )


def _fixed(index: ir.Expr, scope: Scope, value: ir.Expr | None = None) -> bool:
    """Whether ``index`` reads nothing a call in ``value`` may change: no binding, workgroup
    or private var (a helper may write those), no function-scope var where ``value`` passes a
    pointer (the only way a helper reaches one; any var where no ``value`` is given), nothing
    through a pointer, no call."""
    pointers = value is None or any(
        type(n) in (ir.AddressOf, RawAddress)
        or type(n) is ir.Name
        and isinstance(getattr(scope.lookup(n.name), "ty", None), Ptr)
        for n in ir.walk(value)
    )
    for node in ir.walk(index):
        if type(node) in (ir.FnCall, ir.Deref):
            return False
        if type(node) is ir.Name:
            sym = scope.lookup(node.name)
            if sym is None or sym.kind in ("binding", "workgroup", "private"):
                return False
            if sym.kind == "var" and pointers:
                return False
    return True


class Assignments:
    """The :class:`kvdsl.frontend.typer.Typer`'s rewriting of swizzle and phony assignments."""

    @staticmethod
    def for_as_blocks(s: ir.For) -> ir.Block:
        """``for (init; cond; update) { body }`` whose initialiser or update is a swizzle
        assignment (a block of statements in the IR) or a call (a statement the IR's ``for``
        does not hold), as WGSL defines the loop: ``{ init;
        loop { if !(cond) { break; } { body } continuing { update } } }`` (the body a block of
        its own, so its declarations stay out of the update's scope)."""
        init = () if s.init is None else (s.init,)
        if s.update is None:
            return ir.Block(init + (ir.For(None, s.cond, None, s.body),))
        leave = () if s.cond is None else (ir.If(ir.Unary(Op.NOT, s.cond), (ir.Break(),)),)
        return ir.Block(init + (ir.Loop(leave + (ir.Block(s.body),), (s.update,)),))

    def lhs_base(self, base: ir.Expr, scope: Scope) -> ir.Expr:
        """``base`` of an assignment's member target, typed (through a pointer: ``p.xy``)."""
        return self.through(self.expr(base, scope, None), scope)

    def swizzle_target(self, base: ir.Expr, name: str, scope: Scope) -> bool:
        """Whether ``base.name``, an assignment's target, is a swizzle of a vector."""
        if len(name) < 2 or not (set(name) <= XYZW or set(name) <= RGBA):
            return False
        try:
            return isinstance(self.type_of(self.lhs_base(base, scope), scope), Vec)
        except WgslTypeError:
            return False  # the assignment's own check says why

    def swizzle_assign(
        self, s: ir.Assign, base: ir.Expr, name: str, scope: Scope, ret: Type | None, loop: bool
    ) -> ir.Block:
        """``v.zx = e`` (or ``op=``), as Tint takes it: ``e`` once into a ``let`` of a fresh
        name, then one assignment per component, ``v.z = t.x; v.x = t.y;`` (``v.z op= t``
        each, of a scalar ``e``), in a block of their own."""
        bt = self.type_of(base, scope)
        comps = name.translate(RGBA_AS_XYZW) if set(name) <= RGBA else name
        text = f"{value_text(base)}.{name}"
        if not set(comps) <= set("xyzw"[: bt.n]) or len(comps) > 4:
            raise self.error(f"{text}: no such swizzle of a {bt}")
        if len(set(comps)) != len(comps):
            raise self.error(
                f"{text} = ...: cannot assign to a vector swizzle with duplicate target components"
            )
        if id(s) in self.steps:
            step = "++" if s.op is Op.ADD else "--"
            raise self.error(
                f"{text}{step}: a swizzle cannot be incremented or decremented (WGSL's ++ and "
                "-- take a scalar)"
            )
        shift = s.op in (Op.SHL, Op.SHR)
        elem = u32 if shift else bt.scalar
        want = Vec(len(comps), elem)
        value = self.expr(s.value, scope, want)
        vt = self.type_of(value, scope)
        scalar = s.op is not None and vt == elem
        if vt != want and not scalar:
            raise self.error(
                f"{text} = {value_text(value)}: cannot assign a {vt} to the swizzle {text}, a "
                f"{Vec(len(comps), bt.scalar)}"
            )
        inner = Scope(scope)
        fresh = self.fresh_names(scope)
        out: list[ir.Stmt] = []
        if hoisted(base, value, scope):
            base = self.hoist_indices(base, fresh, out, scope)
        tmp = fresh()
        out.append(ir.Let(tmp, value))
        for j, c in enumerate(comps):
            part = ir.Name(tmp) if scalar else ir.Member(ir.Name(tmp), "xyzw"[j])
            out.append(ir.Assign(ir.Member(base, c), part, s.op))
        for stmt in out:
            self.check(stmt, inner, ret, loop)
            self.lines[id(stmt)] = self.line
        return ir.Block(tuple(out))

    @staticmethod
    def fresh_names(scope: Scope):
        """A function giving names no declaration in ``scope`` takes, ``_swizzle0`` on, each
        once."""
        taken: set[str] = set()

        def fresh() -> str:
            k = 0
            while scope.lookup(f"_swizzle{k}") is not None or f"_swizzle{k}" in taken:
                k += 1
            taken.add(f"_swizzle{k}")
            return f"_swizzle{k}"

        return fresh

    def hoist_indices(self, ref: ir.Expr, fresh, out: list[ir.Stmt], scope: Scope) -> ir.Expr:
        """``ref`` (an assignment's reference) with each index that reads memory or calls a
        function (not :func:`_fixed`) a ``let`` of a ``fresh`` name appended to ``out``, left
        to right: the reference evaluated once, before the value (a swizzle assignment writes
        it a component at a time)."""
        match ref:
            case ir.Index(base, index) if _fixed(index, scope):
                return ir.Index(self.hoist_indices(base, fresh, out, scope), index)
            case ir.Index(base, index):
                base = self.hoist_indices(base, fresh, out, scope)
                name = fresh()
                out.append(ir.Let(name, index))
                return ir.Index(base, ir.Name(name))
            case ir.Member(base, name):
                return ir.Member(self.hoist_indices(base, fresh, out, scope), name)
            case ir.Deref(x):
                return ir.Deref(self.hoist_indices(x, fresh, out, scope))
        return ref

    def phony(self, value: ir.Expr, scope: Scope, ret: Type | None, loop: bool) -> ir.Stmt | None:
        """``_ = e;``: a call statement where ``e`` is a helper's call, a ``let`` of a fresh name
        where ``e`` holds one (its calls run, in order), else nothing (``e`` has no effect)."""
        e = self.expr(value, scope, None)
        ty = self.type_of(e, scope)
        if not isinstance(ty, (Scalar, Vec, Mat, Array, Struct, Ptr)):
            raise self.error(
                f"_ = {value_text(e)}: the value is a {ty}; WGSL's phony assignment takes a "
                "constructible value or a pointer (use &)"
            )
        if type(e) is ir.FnCall:
            return self.check(ir.CallStmt(e), scope, ret, loop)
        if not any(type(node) is ir.FnCall for node in ir.walk(e)):
            return None
        k = 0
        while scope.lookup(f"_phony{k}") is not None:
            k += 1
        return self.check(ir.Let(f"_phony{k}", e), scope, ret, loop)
