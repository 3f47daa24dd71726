"""Interleave a loop's steps: unroll it ``copies`` times and sink every copy's stores below
every copy's loads.

A GPU runs a loop's steps in order, and it cannot move a step's loads above the previous step's
stores unless it can prove they touch other memory: a lane whose steps each load and store makes
one memory round trip per step (the block walk's decode appends: 16 steps, 12-18 µs on an H200
against a 4 µs dispatch). This pass rewrites a counted loop whose body is ``let``s, ``if`` /
``else`` and stores to storage bindings so that one trip runs ``copies`` steps:

- copy ``u`` of the body renames each name the body declares ``name_u`` and reads the loop
  variable as ``s + u``; the loop steps by ``copies``;
- each copy keeps its control flow and loads where they were, and each store in it becomes a
  record instead: the statement list holding stores sets a flag ``put{k}_u = true``, and each
  store ``b[i] = v`` sets ``at{n}_u = i`` and ``val{n}_u = v`` (``var``s declared, the flags
  false, at the top of the trip);
- after every copy: ``if (put{k}_u) { b[at{n}_u] = val{n}_u; ... }`` per flag, copy by copy, in
  the order the body stored.

So every load the trip makes is issued before its first store, and every load and store is the
one the original steps make, under the same conditions (nothing is speculated). Moving a load
above an earlier step's store is sound only where no store can write what it reads: the pass
refuses a body that loads from a binding it stores to, and any statement but ``let``, comments,
``if`` and stores of a whole element to a binding (loops, ``var``s, barriers, returns). A leading
``if (c) { break; }`` (an exit that holds for every later step too) stays the trip's first
statement. Store indices are u32 (the verifier rejects the kernel otherwise), and the caller
guarantees the trip count divides by ``copies``.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from kvdsl.ir.nodes import (
    Assign,
    Binary,
    Break,
    Call,
    Comment,
    Construct,
    Convert,
    Expr,
    FnCall,
    For,
    If,
    Index,
    Let,
    Lit,
    Member,
    Name,
    Stmt,
    Unary,
    Var,
)
from kvdsl.ir.ops import Op
from kvdsl.ir.types import Scalar, Vec, bool_, u32


class _Refused(Exception):
    """The body is not one the pass can rewrite."""


def interleave(loop: For, copies: int, elems: dict[str, Scalar | Vec]) -> For | None:
    """``loop`` running ``copies`` steps per trip with its stores sunk below every load (see
    the module); None where the body is not one the pass rewrites. ``elems``: each storage
    binding's element type, by name."""
    if copies == 1:
        return loop
    head, body = _split_exit(loop.body)
    lets: set[str] = set()
    stores: list[str] = []  # the binding of each store, in body order
    try:
        _scan(body, elems, lets, stores)
    except _Refused:
        return None
    if not stores or _reads(body, elems) & set(stores):
        return None
    var = loop.init.name
    decls: list[Stmt] = []
    steps: list[Stmt] = []
    sinks: list[Stmt] = []
    for u in range(copies):
        names: dict[str, Expr] = {n: Name(f"{n}_{u}") for n in lets}
        if u:
            names[var] = Binary(Op.ADD, Name(var), Lit(u, u32))
        copy = _Copy(names, u, elems)
        steps += copy.body(body)
        decls += copy.decls
        sinks += copy.sinks
    update = Assign(loop.update.target, Binary(Op.ADD, Name(var), Lit(copies, u32)))
    return dataclasses.replace(loop, update=update, body=(*head, *decls, *steps, *sinks))


def _split_exit(body: tuple[Stmt, ...]) -> tuple[tuple[Stmt, ...], tuple[Stmt, ...]]:
    """A leading ``if (c) { break; }`` (after comments) apart from the rest."""
    for i, s in enumerate(body):
        if isinstance(s, Comment):
            continue
        if isinstance(s, If) and s.then == (Break(),) and not s.orelse:
            return body[: i + 1], body[i + 1 :]
        break
    return (), body


def _scan(
    body: tuple[Stmt, ...], elems: dict[str, Scalar | Vec], lets: set[str], stores: list[str]
) -> None:
    """Check ``body`` is one the pass rewrites; collect the names it declares and the binding
    of each store."""
    for s in body:
        match s:
            case Let(name, _):
                lets.add(name)
            case Comment():
                pass
            case If(_, then, orelse):
                _scan(then, elems, lets, stores)
                _scan(orelse, elems, lets, stores)
            case Assign(Index(Name(b), _), _, None) if b in elems:
                stores.append(b)
            case _:
                raise _Refused


def _reads(body: tuple[Stmt, ...], elems: dict[str, Scalar | Vec]) -> set[str]:
    """The bindings ``body`` loads from."""
    out: set[str] = set()
    stack: list = list(body)
    while stack:
        x = stack.pop()
        match x:
            case Let(_, value):
                stack.append(value)
            case If(cond, then, orelse):
                stack += (cond, *then, *orelse)
            case Assign(Index(_, index), value, _):
                stack += (index, value)
            case Index(Name(b), index) if b in elems:
                out.add(b)
                stack.append(index)
            case Index(base, index):
                stack += (base, index)
            case Unary(_, a) | Convert(_, a) | Member(a, _):
                stack.append(a)
            case Binary(_, a, b):
                stack += (a, b)
            case Call(_, args) | FnCall(_, args) | Construct(_, args):
                stack += args
    return out


class _Copy:
    """One copy of the body: its statements with stores recorded, the ``var``s they record
    into, and the stores sunk below every copy."""

    def __init__(self, names: dict[str, Expr], u: int, elems: dict[str, Scalar | Vec]) -> None:
        self.sub: Callable[[str], Expr | None] = names.get
        self.u = u
        self.elems = elems
        self.decls: list[Stmt] = []
        self.sinks: list[Stmt] = []
        self.flags = 0
        self.stores = 0

    def body(self, stmts: tuple[Stmt, ...]) -> list[Stmt]:
        """``stmts`` renamed, each run of adjacent stores recorded under one flag."""
        out: list[Stmt] = []
        run: list[Stmt] = []
        u = self.u
        for s in stmts:
            if not isinstance(s, Assign):
                self._flag(out, run)
                run = []
            match s:
                case Let(name, value):
                    out.append(Let(f"{name}_{u}", _rename(value, self.sub)))
                case Comment():
                    if u == 0:
                        out.append(s)
                case If(cond, then, orelse):
                    c = _rename(cond, self.sub)
                    out.append(If(c, tuple(self.body(then)), tuple(self.body(orelse))))
                case Assign(Index(Name(b), index), value):
                    n = self.stores
                    self.stores += 1
                    at, val = f"at{n}_{u}", f"val{n}_{u}"
                    self.decls += (Var(at, u32), Var(val, self.elems[b]))
                    out.append(Assign(Name(at), _rename(index, self.sub)))
                    out.append(Assign(Name(val), _rename(value, self.sub)))
                    run.append(Assign(Index(Name(b), Name(at)), Name(val)))
        self._flag(out, run)
        return out

    def _flag(self, out: list[Stmt], run: list[Stmt]) -> None:
        """Close a run of recorded stores: set its flag in ``out`` and sink the run under it. A
        run closes before the statement after it, so :attr:`sinks` holds the runs in the order
        the body stores."""
        if not run:
            return
        flag = f"put{self.flags}_{self.u}"
        self.flags += 1
        self.decls.append(Var(flag, bool_, Lit(False, bool_)))
        out.append(Assign(Name(flag), Lit(True, bool_)))
        self.sinks.append(If(Name(flag), tuple(run)))


def _rename(e: Expr, sub: Callable[[str], Expr | None]) -> Expr:
    """``e`` with each ``Name`` that ``sub`` maps replaced."""
    match e:
        case Name(n):
            r = sub(n)
            return e if r is None else r
        case Lit():
            return e
        case Unary(op, a):
            return Unary(op, _rename(a, sub))
        case Binary(op, a, b):
            return Binary(op, _rename(a, sub), _rename(b, sub))
        case Call(op, args):
            return Call(op, tuple(_rename(a, sub) for a in args))
        case FnCall(name, args):
            return FnCall(name, tuple(_rename(a, sub) for a in args))
        case Convert(ty, a):
            return Convert(ty, _rename(a, sub))
        case Construct(ty, args):
            return Construct(ty, tuple(_rename(a, sub) for a in args))
        case Index(base, index):
            return Index(_rename(base, sub), _rename(index, sub))
        case Member(base, name):
            return Member(_rename(base, sub), name)
    raise TypeError(f"not an expression: {e!r}")
