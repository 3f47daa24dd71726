"""Dead ``let``s: once it has verified a kernel, the builder drops every ``let`` of arithmetic
(no load, no helper call) whose name nothing reads.

Shared nodes compute what some modes need and others do not: the flat walk names the vector's
row and its index in the row (a copy reads neither), the window nodes name every boundary of the
window (an append reads ``skip``, a shift reads ``evicted``). A ``let`` has no effect but its
value, so the kernel is the same without the unread ones, and the emitted WGSL says only what it
computes. A dead ``let`` that loads is kept (:func:`_arithmetic` says why); the GPU's compiler
drops it. Names are matched by spelling across the whole body, so a name shadowed in an inner
block keeps every ``let`` of that spelling: the pass can keep a dead ``let``, never drop a live
one. It repeats until nothing more is dropped (a ``let`` read only by a dead one is dead too).
"""

from __future__ import annotations

from dataclasses import replace

from kvdsl.ir import tree as ir


def drop_dead_lets(body: tuple[ir.Stmt, ...]) -> tuple[ir.Stmt, ...]:
    """``body`` without the arithmetic ``let``s whose names it never reads (see the module)."""
    while True:
        read: set[str] = set()
        _reads(body, read)
        kept = _keep(body, read)
        if kept is body:
            return body
        body = kept


def _keep(stmts: tuple[ir.Stmt, ...], read: set[str]) -> tuple[ir.Stmt, ...]:
    """``stmts`` without dead ``let``s; ``stmts`` itself when nothing in it changed."""
    out: list[ir.Stmt] = []
    changed = False
    for s in stmts:
        t = type(s)
        if t is ir.Let:
            if s.name not in read and _arithmetic(s.value):
                changed = True
                continue
        elif t is ir.If:
            then, orelse = _keep(s.then, read), _keep(s.orelse, read)
            if then is not s.then or orelse is not s.orelse:
                s, changed = ir.If(s.cond, then, orelse), True
        elif t is ir.For:
            inner = _keep(s.body, read)
            if inner is not s.body:
                s, changed = ir.For(s.init, s.cond, s.update, inner), True
        elif t is ir.Loop or t is ir.Block:
            inner = _keep(s.body, read)
            if inner is not s.body:
                s, changed = replace(s, body=inner), True
        out.append(s)
    return tuple(out) if changed else stmts


def _arithmetic(e: ir.Expr) -> bool:
    """Whether ``e`` reads no memory and calls no helper: only names, literals, members and
    operators. A dead ``let`` that loads stays, so that a binding read only there is still
    read (the verifier rejects a binding nothing reads) and the author sees the load."""
    return not any(isinstance(x, (ir.Index, ir.FnCall)) for x in ir.walk(e))


def _reads(stmts: tuple[ir.Stmt, ...], read: set[str]) -> None:
    """Add every name an expression of ``stmts`` reads to ``read``. Not :func:`walk`: that
    visits every node, type and tuple, where this follows expressions only."""
    exprs: list[ir.Expr] = []
    todo = list(stmts)
    while todo:
        s = todo.pop()
        t = type(s)
        if t is ir.Let:
            exprs.append(s.value)
        elif t is ir.Assign:
            exprs += (s.target, s.value)
        elif t is ir.If:
            exprs.append(s.cond)
            todo += s.then
            todo += s.orelse
        elif t is ir.For:
            todo += s.body
            for part in (s.init, s.update):
                if part is not None:
                    todo.append(part)
            if s.cond is not None:
                exprs.append(s.cond)
        elif t is ir.Loop or t is ir.Block:
            todo += s.body
            if t is ir.Loop:
                todo += s.continuing
                if s.break_if is not None:
                    exprs.append(s.break_if)
        elif t is ir.Switch:
            exprs.append(s.selector)
            exprs += [e for c in s.cases for e in c.selectors if e is not None]
            todo += [x for c in s.cases for x in c.body]
        elif t is ir.CallStmt:
            exprs.append(s.call)
        elif t is ir.AtomicStmt:
            exprs.append(s.call)
        elif t is ir.ConstAssert:
            exprs.append(s.cond)
        elif t is ir.Var or t is ir.Return:
            value = s.init if t is ir.Var else s.value
            if value is not None:
                exprs.append(value)
    add, push = read.add, exprs.append
    while exprs:
        e = exprs.pop()
        t = type(e)
        if t is ir.Name:
            add(e.name)
        elif t is ir.Lit:
            continue
        elif t is ir.Binary:
            push(e.a)
            push(e.b)
        elif t is ir.Index:
            exprs += (e.base, e.index)
        elif t is ir.Member:
            push(e.base)
        elif t is ir.Unary or t is ir.Convert or t is ir.Bitcast:
            push(e.x)
        elif t is ir.Call or t is ir.FnCall or t is ir.Construct:
            exprs += e.args
        elif t is ir.AtomicCall:
            exprs += (e.target, *e.args)
        elif t is ir.UniformLoad:
            push(e.x)
