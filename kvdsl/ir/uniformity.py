"""WGSL's uniformity analysis (§15.2 of the WGSL spec) over kvdsl's IR.

A ``workgroupBarrier()`` must be reached by every invocation of a workgroup or by none, and a
``subgroupShuffleXor()`` by every invocation of a subgroup, with a mask the same in each; WGSL
states where that holds by an analysis every implementation runs (Tint refuses a module that
fails it; naga, as wgpu 0.32 ships it, does not check it). This module runs the spec's
analysis rather than a list of accepted shapes, so kvdsl takes what Tint takes:

- a graph whose nodes stand for the uniformity of control flow at a point and of values, with
  an edge from a node to each node it depends on, two special ones, *MayBeNonUniform* (what
  differs between invocations: ``local_invocation_id``, ``global_invocation_id``, a load of a
  ``read_write`` binding or of workgroup memory, a shuffle's result) and the requirements
  (a barrier's or a shuffle's control flow, a shuffle's mask);
- the statement rules: an ``if`` leaves control flow as uniform as it found it when neither
  branch can ``break``, ``continue`` or ``return`` (its *behaviour* is {Next}), else it depends
  on the branches' control flow, which depends on the condition; a loop's iterations depend on
  the control flow at the end of its body and its update; a ``for`` is the spec's desugared
  ``loop { if !(cond) { break; } body continuing { update } }``;
- the value rules: a literal, a const, ``params``, a uniform builtin or a load of a ``read``
  binding takes the uniformity of the control flow it is computed in; a ``var``'s value is
  tracked statement by statement (a join where branches or loop trips meet); a helper function
  is analysed once and called by its tags (whether its result depends on the invocation, and on
  which arguments).

A requirement that reaches *MayBeNonUniform* is refused, with the chain that leads there
(:func:`check`). The spec's analysis has a second scope for subgroup operations when an
implementation offers the ``subgroup_uniformity`` language extension; kvdsl runs the workgroup
scope's analysis for both (as an implementation without that extension does): every subgroup
builtin must be called in uniform control flow, the second argument of ``subgroupShuffleXor``,
``subgroupShuffleUp``, ``subgroupShuffleDown`` and ``subgroupBroadcast`` must be uniform, and a
subgroup builtin's result (a reduction's too, the same in its subgroup) may be non-uniform.

Where the spec's text is looser than Tint, kvdsl follows Tint: a store to a lane of a
function-scope vector makes the variable's value depend on the lane's index too.
``tests/ir/test_uniformity.py`` holds the verdicts to Tint's on generated kernels.

The statements' behaviours come from :mod:`kvdsl.ir.behavior`, the graph from
:mod:`kvdsl.ir.depgraph`.
"""

from __future__ import annotations

from kvdsl.ir import ops
from kvdsl.ir import tree as ir
from kvdsl.ir.types import Ptr
from kvdsl.ir.behavior import (
    BREAK,
    CONTINUE,
    NEXT,
    NEXT_ONLY,
    RETURN,
    behavior,
    body_behavior,
    statement_behavior,
    switch_behavior,
)
from kvdsl.ir.depgraph import MAY_BE_NON_UNIFORM, Graph
from kvdsl.ir.show import loop_head, show

# What a subgroup builtin's second argument, which must be uniform, is (shuffles: the mask).
_UNIFORM_ARG = {
    ops.Op.SUBGROUP_SHUFFLE_UP: "the delta",
    ops.Op.SUBGROUP_SHUFFLE_DOWN: "the delta",
    ops.Op.SUBGROUP_BROADCAST: "the lane",
}


class _Tags:
    """How a call of a helper function behaves (the spec's function and parameter tags)."""

    __slots__ = ("result_non_uniform", "result_params", "call_uniform", "params_uniform")

    def __init__(self, result_non_uniform, result_params, call_uniform, params_uniform) -> None:
        self.result_non_uniform: str | None = result_non_uniform  # why, or None
        self.result_params: tuple[bool, ...] = result_params  # the result depends on param i
        self.call_uniform: str | None = call_uniform  # what needs the call uniform, or None
        self.params_uniform: tuple[str | None, ...] = params_uniform  # what needs arg i uniform


class _VarSlot:
    """A function-scope ``var``: the node of its value before the statement being analysed."""

    __slots__ = ("name", "node")

    def __init__(self, name: str, node: int) -> None:
        self.name = name
        self.node = node


class UniformityError(Exception):
    """A requirement of uniformity that the analysis cannot show; ``node``: the statement."""

    def __init__(self, message: str, node: ir.Stmt | None) -> None:
        super().__init__(message)
        self.node = node


class _Analysis:
    """One function's graph: its statements and expressions, in order (§15.2.6-8)."""

    def __init__(self, kernel: ir.Kernel, tags: dict[str, _Tags], where: str) -> None:
        self.g = Graph()
        self.tags = tags
        self.where = where  # "" for the entry point, " in function NAME" for a helper
        # Names in scope (one dict; each scope's declarations undone when it closes) and the
        # live vars, in declaration order.
        self.env: dict[str, int | _VarSlot] = {}
        self.undo: list[list[tuple[str, int | _VarSlot | None]]] = [[]]
        self.live: list[_VarSlot] = []
        self.marks: list[int] = [0]
        self.loops: list[tuple[list, list]] = []  # per loop: states at breaks, at continues
        # (node, subject, what must hold of it, the statement)
        self.required: list[tuple[int, str, str, ir.Stmt | None]] = []
        self.returns: list[int] = []
        self.stmt: ir.Stmt | None = None  # the innermost statement being analysed
        self.sources: dict[str, str] = {}  # names whose values may differ: why
        read_only = {"params"} | {c.name for c in kernel.consts} | {u.name for u in kernel.uniforms}
        for b in kernel.bindings:
            if b.access == "read":
                read_only.add(b.name)
            else:
                self.sources[b.name] = f"a load of '{b.name}' (read_write storage)"
        for w in kernel.workgroup_vars:
            self.sources[w.name] = f"a load of workgroup var '{w.name}'"
        for p in kernel.private_vars:
            self.sources[p.name] = f"a load of var<private> '{p.name}'"
        self.read_only = read_only
        # Uniform memory (the params, the other uniforms), and the nodes of the lets and
        # parameters that hold a pointer into it: what such a pointer reads is uniform.
        self.uniform_memory = {"params"} | {u.name for u in kernel.uniforms}
        self.uniform_pointers: set[int] = set()
        self.source_nodes: dict[str, int] = {}

    # -- names --
    def declare(self, name: str, value: int | _VarSlot) -> None:
        self.undo[-1].append((name, self.env.get(name)))
        self.env[name] = value
        if type(value) is _VarSlot:
            self.live.append(value)

    def push(self) -> None:
        self.undo.append([])
        self.marks.append(len(self.live))

    def pop(self) -> None:
        env = self.env
        for name, old in reversed(self.undo.pop()):
            if old is None:
                del env[name]
            else:
                env[name] = old
        del self.live[self.marks.pop() :]

    def source(self, name: str, label: str) -> int:
        """The node of a value that may differ between invocations (one per name)."""
        n = self.source_nodes.get(name)
        if n is None:
            n = self.source_nodes[name] = self.g.node(MAY_BE_NON_UNIFORM, label=label)
        return n

    def name(self, name: str, cf: int) -> int:
        got = self.env.get(name)
        if got is not None:
            x = got.node if type(got) is _VarSlot else got
            return cf if x == cf else self.g.node(cf, x)
        if name in self.read_only:
            return cf
        label = self.sources.get(name)
        if label is None:  # not declared: the verifier names it; nothing to depend on
            return cf
        return self.source(name, label)

    def state(self) -> dict[_VarSlot, int]:
        return {v: v.node for v in self.live}

    def meet(self, states: list[dict[_VarSlot, int]]) -> None:
        """Each live var's value: the join of its values in ``states`` (control flow that meets
        here); unchanged when none reaches this point."""
        if not states:
            return
        for v in self.live:
            nodes = [s[v] for s in states if v in s]
            if nodes:
                joined = self.g.join(*nodes)
                v.node = joined if joined == nodes[0] else self.g.node(joined, label=f"'{v.name}'")

    # -- requirements --
    def require(self, node: int, subject: str, predicate: str) -> None:
        """``node`` must be uniform: ``subject`` ``predicate`` (for the message)."""
        self.required.append((node, subject, predicate, self.stmt))

    # -- expressions: (CF, e) => V; no expression of the subset changes control flow --
    def value(self, e: ir.Expr, cf: int) -> int:
        t = type(e)
        if t is ir.Name:
            return self.name(e.name, cf)
        if t is ir.Lit:
            return cf
        if t is ir.Binary:
            if e.op is ops.Op.LAND or e.op is ops.Op.LOR:
                return self.value(e.b, self.value(e.a, cf))  # the right side runs under the left
            return self.g.join(self.value(e.a, cf), self.value(e.b, cf))
        if t is ir.Unary or t is ir.Convert or t is ir.Bitcast:
            return self.value(e.x, cf)
        if t is ir.Member:
            return self.value(e.base, cf)
        if t is ir.Index:
            return self.g.join(self.value(e.base, cf), self.value(e.index, cf))
        if t is ir.Construct:
            return self.g.join(cf, *(self.value(a, cf) for a in e.args))
        if t is ir.Call:
            args = [self.value(a, cf) for a in e.args]
            if e.op in ops.SUBGROUP_OPS:
                spelling = ops.info(e.op).spelling
                self.require(cf, f"{spelling}()", "must be called in uniform control flow")
                if e.op in ops.SUBGROUP_UNIFORM_ARG:
                    what = _UNIFORM_ARG.get(e.op, "the mask")
                    self.require(args[1], f"{what} of {spelling}()", "must be uniform")
                return self.g.node(
                    MAY_BE_NON_UNIFORM, label=f"{spelling}()'s result (another invocation's value)"
                )
            return self.g.join(cf, *args)
        if t is ir.AtomicCall:
            self.value(e.target, cf)
            for a in e.args:
                self.value(a, cf)
            return self.g.node(MAY_BE_NON_UNIFORM, label=f"atomic{e.fn}()'s result")
        if t is ir.Deref:
            # What a pointer points at is not tracked: taken as non-uniform (a barrier under a
            # condition on it is refused, which may refuse what Tint's finer analysis takes),
            # unless it points into uniform memory (as uniform as the pointer).
            pointer = self.value(e.x, cf)
            if self.into_uniform(e.x):
                return pointer
            return self.g.node(MAY_BE_NON_UNIFORM, label="a value read through a pointer")
        if t is ir.AddressOf:
            return self.address(e.x, cf)
        if t is ir.UniformLoad:
            self.require(cf, "workgroupUniformLoad()", "must be called in uniform control flow")
            self.require(
                self.value(e.x, cf), "the pointer of workgroupUniformLoad()", "must be uniform"
            )
            return cf
        if t is ir.FnCall:
            args = [self.value(a, cf) for a in e.args]
            for a in e.args:  # a var passed by pointer may come back holding anything
                root = a.x if type(a) is ir.AddressOf else None
                while type(root) is ir.Index or type(root) is ir.Member:
                    root = root.base
                slot = self.env.get(root.name) if type(root) is ir.Name else None
                if type(slot) is _VarSlot:
                    slot.node = self.g.node(
                        MAY_BE_NON_UNIFORM, label=f"'{slot.name}' (written through a pointer)"
                    )
            tags = self.tags.get(e.name)
            if tags is None:  # not declared: the verifier names it
                return self.g.join(cf, *args)
            if tags.call_uniform is not None:
                self.require(
                    cf,
                    f"{e.name}()",
                    f"must be called in uniform control flow ({tags.call_uniform})",
                )
            for i, (arg, why) in enumerate(zip(args, tags.params_uniform)):
                if why is not None:
                    self.require(arg, f"argument {i + 1} of {e.name}()", f"must be uniform ({why})")
            deps = [a for a, used in zip(args, tags.result_params) if used]
            if tags.result_non_uniform is not None:
                deps.append(
                    self.g.node(
                        MAY_BE_NON_UNIFORM, label=f"{e.name}()'s result ({tags.result_non_uniform})"
                    )
                )
            return self.g.join(cf, *deps)
        return cf

    def into_uniform(self, p: ir.Expr) -> bool:
        """Whether pointer ``p`` points into uniform memory: ``&params...``, ``&u...`` (a
        uniform not shadowed), or a let or parameter holding such a pointer."""
        if type(p) is ir.Name:
            got = self.env.get(p.name)
            return type(got) is int and got in self.uniform_pointers
        if type(p) is not ir.AddressOf:
            return False
        root = p.x
        while type(root) is ir.Index or type(root) is ir.Member:
            root = root.base
        if type(root) is ir.Deref:
            return self.into_uniform(root.x)
        return (
            type(root) is ir.Name and root.name in self.uniform_memory and root.name not in self.env
        )

    def address(self, x: ir.Expr, cf: int) -> int:
        """The uniformity of the pointer ``&x``: of the indices that pick its element."""
        t = type(x)
        if t is ir.Index:
            return self.g.join(self.address(x.base, cf), self.value(x.index, cf))
        if t is ir.Member:
            return self.address(x.base, cf)
        if t is ir.Deref:
            return self.value(x.x, cf)
        return cf

    # -- statements: (CF, s) => CF' --
    def block(self, body: tuple[ir.Stmt, ...], cf: int) -> int:
        self.push()
        try:
            return self.seq(body, cf)
        finally:
            self.pop()

    def seq(self, body: tuple[ir.Stmt, ...], cf: int) -> int:
        for s in body:
            cf = self.statement(s, cf)
            if NEXT not in statement_behavior(s):
                break  # what follows is unreachable and not analysed
        return cf

    def statement(self, s: ir.Stmt, cf: int) -> int:
        outer, self.stmt = self.stmt, s
        try:
            return self._statement(s, cf)
        finally:
            self.stmt = outer

    def _statement(self, s: ir.Stmt, cf: int) -> int:
        g = self.g
        t = type(s)
        if t is ir.Let:
            node = g.node(self.value(s.value, cf), label=f"'{s.name}'")
            if self.into_uniform(s.value):
                self.uniform_pointers.add(node)
            self.declare(s.name, node)
            return cf
        if t is ir.Var:
            init = cf if s.init is None else self.value(s.init, cf)
            self.declare(s.name, _VarSlot(s.name, g.node(init, label=f"'{s.name}'")))
            return cf
        if t is ir.Assign:
            self.assign(s, cf)
            return cf
        if t is ir.If:
            return self.if_(s, cf)
        if t is ir.For or t is ir.Loop:
            return self.loop(s, cf)
        if t is ir.Block:
            return self.block(s.body, cf)
        if t is ir.Break:
            self.loops[-1][0].append(self.state())
            return cf
        if t is ir.Continue:
            self.loops[-1][1].append(self.state())
            return cf
        if t is ir.Return:
            if s.value is not None:
                self.returns.append(self.value(s.value, cf))
            return cf
        if t is ir.Barrier:
            self.require(cf, f"{s.space}Barrier()", "must be reached in uniform control flow")
            return cf
        if t is ir.CallStmt:
            self.value(s.call, cf)
            return cf
        if t is ir.AtomicStmt:
            self.value(s.call, cf)
            return cf
        if t is ir.TextureStore:
            self.value(s.coords, cf)
            if s.layer is not None:
                self.value(s.layer, cf)
            self.value(s.value, cf)
            return cf
        if t is ir.Switch:
            return self.switch(s, cf)
        if t is ir.Comment:
            return cf
        return cf

    def assign(self, s: ir.Assign, cf: int) -> None:
        rhs = self.value(s.value, cf)
        if s.op is not None:  # e1 op= e2 is e1 = e1 op e2, e1 evaluated once
            rhs = self.g.join(rhs, self.value(s.target, cf))
        target, indices = s.target, []
        while type(target) is not ir.Name:
            if type(target) is ir.Index:
                indices.append(self.value(target.index, cf))
                target = target.base
            elif type(target) is ir.Member:
                indices.append(cf)  # a lane or field: a partial assignment
                target = target.base
            else:
                return  # the verifier refuses any other target
        slot = self.env.get(target.name)
        if type(slot) is not _VarSlot:
            return  # a binding or workgroup memory: no value to track
        deps = (rhs, cf, slot.node, *indices) if indices else (rhs, cf)
        slot.node = self.g.node(*deps, label=f"'{slot.name}'")

    def switch(self, s: ir.Switch, cf: int) -> int:
        """Each clause in control flow that depends on the selector; a ``break`` leaves the
        switch (its state met after it), a ``continue`` goes to the enclosing loop's."""
        g = self.g
        head = f"`switch {show(s.selector)}`"
        sel = g.node(self.value(s.selector, cf), label=f"the selector of {head}")
        before = self.state()
        breaks: list[dict[_VarSlot, int]] = []
        continues = self.loops[-1][1] if self.loops else []
        self.loops.append((breaks, continues))
        ends: list[dict[_VarSlot, int]] = []
        ends_cf = []
        try:
            for case in s.cases:
                for v, n in before.items():
                    v.node = n
                ends_cf.append(self.block(case.body, sel))
                if NEXT in behavior(case.body):
                    ends.append(self.state())
        finally:
            self.loops.pop()
        self.meet(ends + breaks)
        b = switch_behavior(s)
        if b == NEXT_ONLY:
            return cf
        leaves = "/".join(x for x in (CONTINUE, RETURN) if x in b)
        return g.node(*ends_cf, label=f"{head}, which some invocations may leave by {leaves}")

    def if_(self, s: ir.If, cf: int) -> int:
        g = self.g
        head = f"`if {show(s.cond)}`"
        cond = g.node(self.value(s.cond, cf), label=f"the condition of {head}")
        before = self.state()
        b_then, b_else = behavior(s.then), behavior(s.orelse) if s.orelse else NEXT_ONLY
        ends: list[dict[_VarSlot, int]] = []
        cf_then = self.block(s.then, cond)
        if NEXT in b_then:
            ends.append(self.state())
        for v, n in before.items():
            v.node = n
        cf_else = self.block(s.orelse, cond)
        if NEXT in b_else:
            ends.append(self.state())
        self.meet(ends)
        b = b_then | b_else
        if b == NEXT_ONLY:
            return cf  # uniform again after it if it was before (§15.2.6)
        leaves = "/".join(x for x in (BREAK, CONTINUE, RETURN) if x in b)
        return g.node(
            cf_then, cf_else, label=f"{head}, which some invocations may leave by {leaves}"
        )

    def loop(self, s: ir.For | ir.Loop, cf: int) -> int:
        g = self.g
        cond = s.cond if type(s) is ir.For else None
        head = f"`{_loop_head(s)}`"
        self.push()
        try:
            if type(s) is ir.For and s.init is not None:
                cf = self.statement(s.init, cf)
            b1 = (
                body_behavior(s.body, cond is not None)
                if type(s) is ir.For
                else body_behavior(s.body + s.continuing, s.break_if is not None)
            )
            iterates = bool(b1 & {NEXT, CONTINUE})
            start = g.node(cf, label=f"the iterations of {head}") if iterates else cf
            heads = {}
            if iterates:
                for v in self.live:
                    v.node = heads[v] = g.node(v.node, label=f"'{v.name}'")
            breaks: list[dict[_VarSlot, int]] = []
            continues: list[dict[_VarSlot, int]] = []
            self.loops.append((breaks, continues))
            c = start
            if cond is not None:
                c = g.node(self.value(cond, c), label=f"the condition of {head}")
                breaks.append(self.state())
            cf1 = self.block(s.body, c)
            ends = [self.state()] if NEXT in behavior(s.body) else []
            self.loops.pop()
            self.meet(ends + continues)
            cf2 = cf1
            if type(s) is ir.For and s.update is not None:
                cf2 = self.statement(s.update, cf1)
            if type(s) is ir.Loop and (s.continuing or s.break_if is not None):
                # The spec's continuing block and its `break if` (a conditional break).
                self.loops.append((breaks, continues))
                cf2 = self.block(s.continuing, cf1)
                self.loops.pop()
                if s.break_if is not None:
                    cf2 = g.node(self.value(s.break_if, cf2), label=f"the break if of {head}")
                    breaks.append(self.state())
            if iterates:
                g.out[start].append(cf2)
                for v, h in heads.items():
                    g.out[h].append(v.node)
            self.meet(breaks)
        finally:
            self.pop()
        if RETURN not in b1:
            return cf  # every invocation that entered leaves it together (§15.2.6)
        return start if iterates else cf1


def _loop_head(s: ir.For | ir.Loop) -> str:
    return "loop { ... }" if type(s) is ir.Loop else loop_head(s)


def _fail(
    a: _Analysis, start: int, subject: str, predicate: str, node: ir.Stmt | None
) -> UniformityError:
    path = a.g.path(start, MAY_BE_NON_UNIFORM)
    assert path is not None
    return UniformityError(
        f"{subject}{a.where} {predicate}, but it depends on {a.g.because(path)} "
        "(WGSL's uniformity analysis)",
        node,
    )


def helper_tags(kernel: ir.Kernel, fn: ir.Function, tags: dict[str, _Tags]) -> _Tags:
    """The tags of helper ``fn`` (the spec's §15.2.3), from its own graph; raises
    :class:`UniformityError` where something in it must be uniform and cannot be."""
    where = f" in function {fn.name}"
    a = _Analysis(kernel, tags, where)
    g = a.g
    cf_start = g.node()
    params = [g.node(label=f"parameter '{p}' of {fn.name}") for p, _ in fn.params]
    for (p, ty), n in zip(fn.params, params):
        if isinstance(ty, Ptr) and ty.space == "uniform":
            a.uniform_pointers.add(n)
        a.declare(p, n)
    a.seq(fn.body, cf_start)
    call_uniform, params_uniform = None, [None] * len(params)
    for node, subject, predicate, stmt in a.required:
        if g.path(node, MAY_BE_NON_UNIFORM):
            raise _fail(a, node, subject, predicate, stmt)
        if call_uniform is None and g.path(node, cf_start):
            call_uniform = f"for {subject} in {fn.name}"
        for i, p in enumerate(params):
            if params_uniform[i] is None and g.path(node, p):
                params_uniform[i] = f"for {subject} in {fn.name}"
    ret = g.join(*a.returns) if a.returns else cf_start
    why = None
    path = g.path(ret, MAY_BE_NON_UNIFORM)
    if path is not None:
        why = "it depends on " + g.because(path)
    return _Tags(
        why,
        tuple(g.path(ret, p) is not None for p in params),
        call_uniform,
        tuple(params_uniform),
    )


def check(kernel: ir.Kernel, sources: dict[str, str] | None = None) -> None:
    """Refuse, with :class:`UniformityError`, a barrier or a shuffle the analysis cannot show
    uniform, or a shuffle mask it cannot show uniform: the first in program order.
    ``sources``: names of the entry point's body, undeclared in ``kernel``, that may be
    non-uniform, each with why."""
    tags: dict[str, _Tags] = {}
    for fn in kernel.functions:
        tags[fn.name] = helper_tags(kernel, fn, tags)
    a = _Analysis(kernel, tags, "")
    a.sources.update(sources or {})
    for p, builtin in kernel.builtins:
        if builtin in ir.UNIFORM_BUILTINS:
            a.read_only.add(p)  # the same in every invocation: the control flow's uniformity
        else:
            a.sources[p] = f"'{p}' ({builtin}, which differs between invocations)"
    a.seq(kernel.body, a.g.node())  # CF_start: uniform
    for node, subject, predicate, stmt in a.required:
        if a.g.path(node, MAY_BE_NON_UNIFORM):
            raise _fail(a, node, subject, predicate, stmt)
