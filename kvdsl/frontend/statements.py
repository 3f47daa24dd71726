"""The parse tree's statements as IR (a rule group of :class:`kvdsl.frontend.transform.ToIR`):
blocks with the own-line comments placed among their statements, control flow, declarations
(``let``, ``const`` and ``var`` stay raw until the typer), assignments, barriers and call
statements; each statement's source line kept in ``lines``."""

from __future__ import annotations

from lark import Token, v_args
from lark.tree import Meta

from kvdsl.frontend.comments import LineComment
from kvdsl.frontend.errors import WgslSyntaxError, discarded
from kvdsl.frontend.records import CallStmt, Phony, RawCtor, RawLet, RawLit, RawVar
from kvdsl.frontend.rules import Rules
from kvdsl.ir import ops
from kvdsl.ir import tree as ir
from kvdsl.ir.ops import Op

_DEFAULT = object()  # the ``default`` selector of a switch clause, until it becomes None


@v_args(inline=True)
class Statements(Rules):
    """Statement rules → IR statements."""

    def _at(self, node: ir.Stmt, meta: Meta) -> ir.Stmt:
        self.lines[id(node)] = meta.line
        return node

    @v_args(meta=True, inline=True)
    def block(self, meta: Meta, *stmts: ir.Stmt) -> tuple[ir.Stmt, ...]:
        return self._commented(meta, stmts)

    @v_args(meta=True, inline=True)
    def loop_body(self, meta: Meta, *parts) -> tuple:
        *stmts, continuing = parts
        return self._commented(meta, tuple(stmts)), continuing

    @v_args(meta=True, inline=True)
    def continuing(self, meta: Meta, *parts) -> tuple:
        *stmts, break_if = parts
        return self._commented(meta, tuple(stmts)), break_if

    def break_if(self, cond: ir.Expr) -> ir.Expr:
        return cond

    @v_args(meta=True, inline=True)
    def switch(self, meta: Meta, selector: ir.Expr, *cases: ir.Case) -> ir.Switch:
        return self._at(ir.Switch(selector, cases), meta)

    def case_clause(self, *parts) -> ir.Case:
        *selectors, body = parts
        return ir.Case(tuple(None if s is _DEFAULT else s for s in selectors), body)

    def default_clause(self, body: tuple) -> ir.Case:
        return ir.Case((None,), body)

    def default_selector(self) -> object:
        return _DEFAULT

    @v_args(meta=True, inline=True)
    def const_assert(self, meta: Meta, cond: ir.Expr) -> ir.ConstAssert:
        return self._at(ir.ConstAssert(cond), meta)

    def _commented(self, meta: Meta, stmts: tuple) -> tuple[ir.Stmt, ...]:
        """``stmts`` with the own-line comments of the braces' lines placed among them."""
        # Children are transformed first, so inner blocks have claimed their comments already.
        stmts = tuple(s for s in stmts if s is not None)
        mine = [
            c
            for c in self.comments
            if meta.line < c.line < meta.end_line and c.line not in self.claimed
        ]
        if not mine:
            return stmts
        out: list[ir.Stmt] = []
        pending = sorted(mine, key=lambda c: c.line)
        for s in stmts:
            while pending and pending[0].line < self.lines[id(s)]:
                out.append(self._comment(pending.pop(0)))
            out.append(s)
        out += [self._comment(c) for c in pending]
        return tuple(out)

    def _comment(self, c: LineComment) -> ir.Comment:
        self.claimed.add(c.line)
        node = ir.Comment(c.text)
        self.lines[id(node)] = c.line
        return node

    @v_args(meta=True, inline=True)
    def if_(self, meta: Meta, cond: ir.Expr, then: tuple, orelse) -> ir.If:
        if orelse is None:
            orelse = ()
        elif isinstance(orelse, ir.If):
            orelse = (orelse,)
        return self._at(ir.If(cond, then, orelse), meta)

    @v_args(meta=True, inline=True)
    def for_(self, meta: Meta, init, cond, update, body) -> ir.For:
        header = (ir.Assign, CallStmt, ir.AtomicStmt, Phony)
        if init is not None and not isinstance(init, (RawLet, RawVar) + header):
            raise self._err(
                "a for initialiser other than let, var, an assignment or a call", meta.line
            )
        if update is not None and not isinstance(update, header):
            raise self._err("a for update other than an assignment or a call", meta.line)
        return self._at(ir.For(init, cond, update, body), meta)

    @v_args(meta=True, inline=True)
    def while_(self, meta: Meta, cond, body) -> ir.For:
        # WGSL defines `while cond { body }` as `for (; cond; ) { body }`: the IR's For, which
        # the emitter prints in that form.
        return self._at(ir.For(None, cond, None, body), meta)

    @v_args(meta=True, inline=True)
    def loop(self, meta: Meta, parts) -> ir.Loop:
        body, continuing = parts
        if continuing is None:
            return self._at(ir.Loop(body), meta)
        return self._at(ir.Loop(body, *continuing), meta)

    @v_args(meta=True, inline=True)
    def block_stmt(self, meta: Meta, body) -> ir.Block:
        return self._at(ir.Block(body), meta)

    @v_args(meta=True, inline=True)
    def let(self, meta: Meta, name: Token, ty, value) -> RawLet:
        return self._at(RawLet(str(name), ty, value), meta)

    @v_args(meta=True, inline=True)
    def local_const(self, meta: Meta, name: Token, ty, value) -> RawLet:
        return self._at(RawLet(str(name), ty, value, const=True), meta)

    @v_args(meta=True, inline=True)
    def local_var(self, meta: Meta, address, name: Token, ty, init) -> RawVar:
        if address is not None and address != ("function", None):
            raise self._err(
                f"var<{address[0]}> inside a function (only var and var<function>)",
                name.line,
                name.column,
            )
        if ty is None and init is None:
            raise WgslSyntaxError(
                f"var {name} needs a type or an initialiser", self.filename, name.line,
                name.column, str(name), (":", "="),
            )  # fmt: skip
        return self._at(RawVar(str(name), ty, init), meta)

    @v_args(meta=True, inline=True)
    def assign(self, meta: Meta, target: ir.Expr, value: ir.Expr) -> ir.Assign | Phony:
        if target == ir.Name("_"):
            return self._at(Phony(value), meta)
        return self._at(ir.Assign(self._lhs(target, meta), value), meta)

    @v_args(meta=True, inline=True)
    def compound_assign(self, meta: Meta, target: ir.Expr, op: Token, value: ir.Expr) -> ir.Assign:
        binop = ops.BY_SPELLING[(False, 2, str(op)[:-1])]
        return self._at(ir.Assign(self._lhs(target, meta), value, binop), meta)

    @v_args(meta=True, inline=True)
    def increment(self, meta: Meta, target: ir.Expr) -> ir.Assign:
        node = ir.Assign(self._lhs(target, meta), RawLit(1, None), Op.ADD)
        self.steps.add(id(node))
        return self._at(node, meta)

    @v_args(meta=True, inline=True)
    def decrement(self, meta: Meta, target: ir.Expr) -> ir.Assign:
        node = ir.Assign(self._lhs(target, meta), RawLit(1, None), Op.SUB)
        self.steps.add(id(node))
        return self._at(node, meta)

    def _lhs(self, target: ir.Expr, meta: Meta) -> ir.Expr:
        root = target
        while isinstance(root, (ir.Index, ir.Member)):
            root = root.base
        if root == ir.Name("_"):
            raise WgslSyntaxError(
                "'_' is assigned only whole, as '_ = e;' (no compound assignment, index or "
                "member of it)",
                self.filename,
                meta.line,
                meta.column,
                "_",
                (),
            )
        if not isinstance(root, (ir.Name, ir.Deref)):
            raise self._err("assignment to something other than a variable", meta.line)
        return target

    @v_args(meta=True, inline=True)
    def return_(self, meta: Meta, value) -> ir.Return:
        return self._at(ir.Return(value), meta)

    @v_args(meta=True, inline=True)
    def break_(self, meta: Meta) -> ir.Break:
        return self._at(ir.Break(), meta)

    @v_args(meta=True, inline=True)
    def continue_(self, meta: Meta) -> ir.Continue:
        return self._at(ir.Continue(), meta)

    @v_args(meta=True, inline=True)
    def barrier(self, meta: Meta) -> ir.Barrier:
        return self._at(ir.Barrier(), meta)

    @v_args(meta=True, inline=True)
    def storage_barrier(self, meta: Meta) -> ir.Barrier:
        return self._at(ir.Barrier("storage"), meta)

    @v_args(meta=True, inline=True)
    def call_stmt(self, meta: Meta, e: ir.Expr) -> CallStmt:
        if isinstance(e, ir.AtomicCall):  # none is @must_use
            return self._at(ir.AtomicStmt(e), meta)
        if not isinstance(e, (ir.FnCall, ir.Call, RawCtor)):
            raise WgslSyntaxError(
                "an expression is not a statement (only a call is)",
                self.filename,
                meta.line,
                meta.column,
                "",
                (),
            )
        if isinstance(e, ir.FnCall):
            return self._at(CallStmt(e), meta)
        if isinstance(e, ir.Call):  # a helper may take the builtin's name (the typer's)
            return self._at(CallStmt(e, (meta.line, meta.column)), meta)
        raise discarded("a conversion", self.filename, meta.line, meta.column)
