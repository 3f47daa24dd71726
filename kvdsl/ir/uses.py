"""Which storage bindings a kernel reads, writes, or both: from its statements, not its
declarations (a ``read_write`` binding may be only written).

A binding is read where an expression loads from it (``src[i]``, a compound assignment
``dst[i] += x``, an atomic other than ``atomicStore``) and written where a statement stores to it
(``dst[i] = x``, an atomic other than ``atomicLoad``). A pointer taken to a binding (``&b[i]``)
counts as both for a ``read_write`` binding (what the pointer's user does is not followed) and as
a read for a ``read`` one. ``arrayLength(&b)`` reads no element. Names are resolved as WGSL
scopes them: a local or parameter of a binding's name hides it. Only the entry point and the
helpers it calls count.
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass

from kvdsl.ir import tree as ir
from kvdsl.ir.types import u32

#: The words a binding's use is stated in (index.json's ``use``).
READ, WRITE, READ_WRITE = "read", "write", "read_write"


class _Uses:
    def __init__(self, kernel: ir.Kernel):
        self.kernel = kernel
        self.bindings = {b.name: b for b in kernel.bindings}
        self.functions = {f.name: f for f in kernel.functions}
        self.reads: set[str] = set()
        self.writes: set[str] = set()
        self.visited: set[str] = set()

    def binding(self, name: str, scope: list[set[str]]) -> ir.Binding | None:
        """The binding ``name`` names where ``scope`` (the local names, innermost last) holds."""
        if any(name in s for s in scope):
            return None
        return self.bindings.get(name)

    def root(self, e: ir.Expr, scope: list[set[str]]) -> ir.Binding | None:
        """The binding whose memory ``e`` (a reference: ``b``, ``b[i]``, ``b[i].x``) names."""
        while isinstance(e, (ir.Index, ir.Member)):
            e = e.base
        return self.binding(e.name, scope) if isinstance(e, ir.Name) else None

    def indices(self, e: ir.Expr, scope: list[set[str]]) -> None:
        """The index expressions inside reference ``e``: loads, wherever ``e`` is."""
        while isinstance(e, (ir.Index, ir.Member)):
            if isinstance(e, ir.Index):
                self.expr(e.index, scope)
            e = e.base
        if not isinstance(e, ir.Name):
            self.expr(e, scope)

    def expr(self, e: object, scope: list[set[str]]) -> None:
        if isinstance(e, ir.Name):
            if self.binding(e.name, scope) is not None:
                self.reads.add(e.name)
        elif isinstance(e, ir.AtomicCall):
            b = self.root(e.target, scope)
            if b is not None:
                if e.fn != "Store":
                    self.reads.add(b.name)
                if e.fn != "Load":
                    self.writes.add(b.name)
            self.indices(e.target, scope)
            for a in e.args:
                self.expr(a, scope)
        elif isinstance(e, ir.AddressOf):
            b = self.root(e.x, scope)
            if b is not None:
                self.reads.add(b.name)
                if b.access == "read_write":
                    self.writes.add(b.name)
            self.indices(e.x, scope)
        elif isinstance(e, ir.FnCall):
            for a in e.args:
                self.expr(a, scope)
            self.function(e.name)
        elif isinstance(e, tuple):
            for x in e:
                self.expr(x, scope)
        elif is_dataclass(e) and not isinstance(e, ir.ArrayLength):
            for f in fields(e):
                self.expr(getattr(e, f.name), scope)

    def function(self, name: str) -> None:
        f = self.functions.get(name)
        if f is None or name in self.visited:
            return
        self.visited.add(name)
        self.block(f.body, [{p for p, _ in f.params}])

    def block(self, body: tuple, scope: list[set[str]]) -> None:
        scope = scope + [set()]
        for s in body:
            self.stmt(s, scope)

    def stmt(self, s: object, scope: list[set[str]]) -> None:
        match s:
            case ir.Let(name, value):
                self.expr(value, scope)
                scope[-1].add(name)
            case ir.Var(name, _, init):
                self.expr(init, scope)
                scope[-1].add(name)
            case ir.Assign(target, value, op):
                b = self.root(target, scope)
                if b is not None:
                    self.writes.add(b.name)
                    if op is not None:
                        self.reads.add(b.name)
                self.indices(target, scope)
                self.expr(value, scope)
            case ir.If(cond, then, orelse):
                self.expr(cond, scope)
                self.block(then, scope)
                self.block(orelse, scope)
            case ir.For(init, cond, update, body):
                inner = scope + [set()]
                if init is not None:
                    self.stmt(init, inner)
                self.expr(cond, inner)
                if update is not None:
                    self.stmt(update, inner)
                self.block(body, inner)
            case ir.Loop(body, continuing, break_if):
                inner = scope + [set()]
                for x in body:  # the continuing block sees the body's names
                    self.stmt(x, inner)
                for x in continuing:
                    self.stmt(x, inner)
                self.expr(break_if, inner)
            case ir.Block(body):
                self.block(body, scope)
            case ir.Switch(selector, cases):
                self.expr(selector, scope)
                for c in cases:
                    self.expr(c.selectors, scope)
                    self.block(c.body, scope)
            case ir.CallStmt(call):
                self.expr(call, scope)
            case ir.AtomicStmt(call):
                self.expr(call, scope)
            case _:  # return, const_assert; break, continue, barriers and comments hold none
                self.expr(s, scope)


def binding_uses(kernel: ir.Kernel) -> dict[str, str]:
    """Each binding's use by ``kernel``, by name, in binding order: :data:`READ`,
    :data:`WRITE` or :data:`READ_WRITE` (a binding the kernel never touches: :data:`READ`, as
    nothing of it is written)."""
    u = _Uses(kernel)
    u.block(kernel.body, [{name for name, _ in kernel.builtins}])
    out = {}
    for b in kernel.bindings:
        r, w = b.name in u.reads, b.name in u.writes
        out[b.name] = READ_WRITE if r and w else WRITE if w else READ
    return out


def bindings_touched(kernel: ir.Kernel) -> set[str]:
    """The bindings ``kernel``'s entry point (and the helpers it calls) reads or writes."""
    u = _Uses(kernel)
    u.block(kernel.body, [{name for name, _ in kernel.builtins}])
    return u.reads | u.writes


#: The texture builtins that name a sampler.
SAMPLING = (
    ir.TextureSampleLevel,
    ir.TextureSampleCompare,
    ir.TextureGather,
    ir.TextureSampleGrad,
    ir.TextureSampleBaseClampToEdge,
)


class _Named(_Uses):
    """Every module resource named, not only the storage bindings read or written: a uniform,
    the params, a texture, ``arrayLength``'s binding."""

    def __init__(self, kernel: ir.Kernel):
        super().__init__(kernel)
        others = [u.name for u in kernel.uniforms] + [t.name for t in kernel.textures]
        others += ["params"] if kernel.params is not None else []
        for name in others:  # read only: a pointer to one writes nothing
            self.bindings[name] = ir.Binding(name, u32, "read")

    def expr(self, e: object, scope: list[set[str]]) -> None:
        held = (ir.ArrayLength, ir.TextureLoad, ir.TextureDimensions, ir.TextureStore)
        held += (ir.TextureNumLayers, ir.TextureNumSamples, ir.TextureNumLevels, *SAMPLING)
        if isinstance(e, held) and self.binding(e.name, scope):
            self.reads.add(e.name)
        if isinstance(e, SAMPLING) and self.binding(e.sampler, scope):
            self.reads.add(e.sampler)
        super().expr(e, scope)


def resources_named(kernel: ir.Kernel, function: str | None = None) -> tuple[set[str], set[str]]:
    """The module resources (storage bindings, uniforms, the params, textures) that ``kernel``'s
    entry point (or helper ``function``) and the helpers it calls name, ``arrayLength``'s
    binding too, as WGSL's static use counts them (a local of a resource's name hides it); and
    the helpers it calls."""
    u = _Named(kernel)
    if function is None:
        u.block(kernel.body, [{name for name, _ in kernel.builtins}])
    else:
        u.function(function)
    return u.reads | u.writes, u.visited
