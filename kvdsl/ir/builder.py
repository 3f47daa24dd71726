"""Build kernels with Python operators and context managers.

The :class:`KernelBuilder` collects a kernel's declarations and statements; expressions are
:class:`~kvdsl.ir.values.Val` values, built with Python operators and the functions of
:mod:`kvdsl.ir.values` (re-exported here).

    kb = KernelBuilder("copy_rows", workgroup_size=64)
    HEAD_DIM = kb.const("HEAD_DIM", u32, 128)
    src = kb.binding("src", f32, "read")
    dst = kb.binding("dst", f32, "read_write")
    rows = kb.param("count")
    i = kb.let("i", kb.gid.x)
    with kb.if_(i >= rows):
        kb.ret()
    with kb.for_range("d", 0, HEAD_DIM) as d:
        dst[i * HEAD_DIM + d] = src[i * HEAD_DIM + d]
    kernel = kb.build(Dispatch(...))
"""

from __future__ import annotations

import dataclasses
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Callable, Iterator

from kvdsl.ir import tree as ir
from kvdsl.ir.dead import drop_dead_lets
from kvdsl.ir.ops import Op
from kvdsl.ir.show import show
from kvdsl.ir.types import Array, Scalar, Struct, Type, Vec, bool_, i32, u32

# Re-exported: kvdsl.nodes, kvdsl.kernels and tests import these from here.
from kvdsl.ir.values import BuildError, Num, Val, as_val, binary, call, describe, lit
from kvdsl.ir.verify import verify

__all__ = [
    "Buffer",
    "BuildError",
    "KernelBuilder",
    "Local",
    "Num",
    "Shared",
    "Val",
    "as_val",
    "binary",
    "call",
    "largest",
    "lit",
    "with_contract",
]


class Buffer:
    """A storage binding: ``buf[i]`` loads, ``buf[i] = v`` stores (in the current block)."""

    def __init__(self, kb: KernelBuilder, binding: ir.Binding) -> None:
        self._kb = kb
        self.binding = binding

    def __getitem__(self, index: Val | int) -> Val:
        idx = as_val(index, u32)
        return Val(ir.Index(ir.Name(self.binding.name), idx.node), self.binding.elem)

    def __setitem__(self, index: Val | int, value: Val | Num) -> None:
        target = self[index]
        value = as_val(value, target.ty)
        if value.ty is not target.ty and value.ty != target.ty:
            raise BuildError(
                f"cannot store {value.ty} into {self.binding.name} of {self.binding.elem}"
            )
        self._kb.emit(ir.Assign(target.node, value.node))


class Local(Val):
    """A function-scope ``var``: assign with :meth:`set`, elements with ``v[i] = x``."""

    __slots__ = ("_kb",)

    def __init__(self, kb: KernelBuilder, name: str, ty: Type) -> None:
        super().__init__(ir.Name(name), ty)
        self._kb = kb

    def set(self, value: Val | Num, op: Op | None = None) -> None:
        """``self = value`` or, with ``op``, ``self op= value``."""
        v = as_val(value, self.ty)
        if op is not None:
            binary(op, self, v)  # type check
        elif v.ty is not self.ty and v.ty != self.ty:
            raise BuildError(f"cannot assign {v.ty} to var {self.node.name}: {self.ty}")
        self._kb.emit(ir.Assign(self.node, v.node, op))

    def __setitem__(self, index: Val | int, value: Val | Num) -> None:
        target = self[index]
        v = as_val(value, target.ty)
        if v.ty is not target.ty and v.ty != target.ty:
            raise BuildError(f"cannot store {v.ty} into {self.node.name}[] of {target.ty}")
        self._kb.emit(ir.Assign(target.node, v.node))


class Shared(Local):
    """A ``var<workgroup>`` array: ``w[i]`` loads, ``w[i] = x`` stores one element; of an array
    of vectors, ``w[i, lane]`` loads and ``w[i, lane] = x`` stores one lane of element ``i``
    (WGSL ``w[i][lane]``), so invocations can fill one vector together."""

    __slots__ = ()

    def __getitem__(self, index: Val | int | tuple[Val | int, Val | int]) -> Val:
        if isinstance(index, tuple):
            i, lane = index
            return super().__getitem__(i)[lane]
        return super().__getitem__(index)

    def __setitem__(self, index: Val | int | tuple[Val | int, Val | int], value: Val | Num) -> None:
        if isinstance(index, tuple) and not isinstance(self.ty.elem, Vec):
            raise BuildError(
                f"workgroup var {self.node.name}: a lane index needs vector elements, "
                f"not {self.ty.elem}"
            )
        super().__setitem__(index, value)

    def set(self, value: Val | Num, op: Op | None = None) -> None:
        raise BuildError(f"workgroup var {self.node.name} is written one element at a time")


_BUILTIN_OF = {v: k for k, v in ir.BUILTIN_INPUTS.items()}  # parameter name -> builtin


def _builtin_value(pname: str, note: str = "") -> property:
    """``KernelBuilder``'s property for the entry point's builtin parameter ``pname``
    (declared on first use)."""
    doc = f"``@builtin({_BUILTIN_OF[pname]}) {pname}``" + (f" ({note})." if note else ".")
    return property(lambda self: self._builtin(pname), doc=doc)


class KernelBuilder:
    """Collects a kernel's declarations and statements; :meth:`build` verifies and returns it."""

    def __init__(self, name: str, workgroup_size: int | tuple[int, int, int] = 64) -> None:
        self.name = name
        wg = workgroup_size if isinstance(workgroup_size, tuple) else (workgroup_size, 1, 1)
        self.workgroup_size = wg
        self.workgroup_size_name: str | None = None
        self.bindings: list[ir.Binding] = []
        self.param_fields: dict[str, Scalar | Vec] = {}  # in declaration order
        self.consts: list[ir.Const] = []
        self.functions: list[ir.Function] = []
        self.workgroup_vars: list[ir.WorkgroupVar] = []
        # Workgroup vars whose users end every use with a barrier (workgroup_var's ``fenced``).
        self.fenced: set[str] = set()
        self.builtins: dict[str, str] = {}
        self.doc: list[str] = []
        self._blocks: list[list[ir.Stmt]] = [[]]
        self._last_if: list[ir.If | None] = [None]
        # Blocks entered by open(): (depth of the block they stand in, the block, before_close).
        self._open: list[tuple[int, _Block, Callable[[], None] | None]] = []

    # -- declarations --
    def const(self, name: str, ty: Scalar, value: Num | Val, comment: str = "") -> Val:
        """A module ``const``; returns a handle naming it."""
        v = as_val(value, ty)
        self.consts.append(ir.Const(name, ty, v.node, comment))
        return Val(ir.Name(name), ty)

    def workgroup_const(self, name: str = "WG") -> Val:
        """Declare the x workgroup size as a const and spell ``@workgroup_size`` with it."""
        self.workgroup_size_name = name
        return self.const(name, u32, self.workgroup_size[0])

    def binding(
        self, name: str, elem: Scalar | Vec, access: str = "read", data: Scalar | None = None
    ) -> Buffer:
        """A storage binding, numbered in declaration order; ``data``: the host array's scalar
        type when it is not the element's (see :class:`~kvdsl.ir.tree.Binding`)."""
        b = ir.Binding(name, elem, access, data)
        self.bindings.append(b)
        return Buffer(self, b)

    def workgroup_var(self, name: str, ty: Array, fenced: bool = False) -> Shared:
        """A module ``var<workgroup> name: array<T, N>;`` shared by each workgroup's
        invocations; index it to load, assign ``w[i] = x`` to store. ``fenced``: its users end
        every use with a barrier, so a walk that loops over the kernel's program needs no barrier
        of its own before the next trip reuses it (:attr:`fenced`)."""
        if not isinstance(ty, Array):
            raise BuildError(f"workgroup var {name}: type {ty} is not a fixed-size array")
        self.workgroup_vars.append(ir.WorkgroupVar(name, ty))
        if fenced:
            self.fenced.add(name)
        return Shared(self, name, ty)

    def param(self, name: str, ty: Scalar | Vec = u32) -> Val:
        """A field of the uniform params struct (declared on first use, in order)."""
        ty = self.param_fields.setdefault(name, ty)
        return Val(ir.Member(ir.Name("params"), name), ty)

    def _builtin(self, pname: str) -> Val:
        builtin = self.builtins.setdefault(pname, _BUILTIN_OF[pname])
        return Val(ir.Name(pname), ir.builtin_type(builtin))

    gid = _builtin_value("gid")
    lid = _builtin_value("lid")
    wid = _builtin_value("wid")
    nwg = _builtin_value("nwg")
    lidx = _builtin_value("lidx", "u32, the invocation's index in its workgroup, x fastest")
    subgroup_size = _builtin_value(
        "sg", "u32, the same for every invocation; the module then enables subgroups"
    )
    subgroup_invocation_id = _builtin_value(
        "sgid", "u32, the invocation's lane in its subgroup; the module then enables subgroups"
    )

    # -- statements --
    def emit(self, stmt: ir.Stmt) -> None:
        """Append a statement to the innermost open block."""
        self._blocks[-1].append(stmt)
        self._last_if[-1] = stmt if isinstance(stmt, ir.If) else None

    def let(self, name: str, value: Val | Num) -> Val:
        v = value if isinstance(value, Val) else as_val(value)
        self._blocks[-1].append(ir.Let(name, v.node))  # self.emit(), inline: lets are many
        self._last_if[-1] = None
        return Val(ir.Name(name), v.ty)

    def var(self, name: str, ty: Scalar | Vec | Array, init: Val | Num | None = None) -> Local:
        node = None if init is None else as_val(init, ty).node
        self.emit(ir.Var(name, ty, node))
        return Local(self, name, ty)

    def comment(self, text: str) -> None:
        for line in text.splitlines():
            self._blocks[-1].append(ir.Comment(line))  # self.emit(), inline
            self._last_if[-1] = None

    def ret(self) -> None:
        self.emit(ir.Return())

    def open(
        self, block: AbstractContextManager[Any], before_close: Callable[[], None] | None = None
    ) -> Any:
        """Enter ``block`` (``kb.for_range(...)``, ``kb.if_(...)``) and leave it open: what
        follows goes into it until the block it stands in closes (at :meth:`build` for the entry
        point's body), which closes it first, after ``before_close`` has emitted its last
        statements. A walk that wraps the rest of a kernel in a loop opens it so."""
        depth = len(self._blocks)
        value = block.__enter__()
        self._open.append((depth, block, before_close))
        return value

    def _close_open(self, depth: int) -> None:
        """Close the blocks :meth:`open` entered at ``depth`` or deeper, innermost first."""
        while self._open and self._open[-1][0] >= depth:
            _, block, before_close = self._open.pop()
            if before_close is not None:
                before_close()
            block.__exit__(None, None, None)

    def leave_if(self, cond: Val) -> None:
        """The rest of the current body runs only where ``cond`` is false: ``if (cond) {
        return; }``, or inside a block :meth:`open` entered (a loop over items, where a return
        would leave the later items too) the rest under an open ``if (!cond) {``. Only at the top
        level of the entry point or of the innermost opened block."""
        if not self._open:
            if len(self._blocks) != 1:
                raise BuildError("leave_if inside a block: only at the top level of the body")
            with self.if_(cond):
                self.ret()
            return
        if len(self._blocks) != self._open[-1][0] + 1:
            raise BuildError("leave_if inside a block: only at the top level of an opened block")
        self.open(self.if_(~self._cond(cond)))

    def barrier(self) -> None:
        """``workgroupBarrier();`` (only where control flow is uniform: see verify)."""
        self.emit(ir.Barrier())

    @contextmanager
    def _block(self) -> Iterator[list[ir.Stmt]]:
        """A bare block whose statements are collected and not emitted (tests use it); the
        public blocks are :class:`_Block`s."""
        body: list[ir.Stmt] = []
        self._blocks.append(body)
        self._last_if.append(None)
        try:
            yield body
        finally:
            self._blocks.pop()
            self._last_if.pop()

    def _cond(self, cond: Val | bool) -> Val:
        c = as_val(cond)
        if c.ty is not bool_ and c.ty != bool_:
            raise BuildError(f"condition is {c.ty}, expected bool")
        return c

    def if_(self, cond: Val | bool) -> AbstractContextManager[None]:
        """``if (cond) { ... }``; follow with :meth:`elif_` / :meth:`else_`."""
        c = self._cond(cond).node
        return _Block(self, None, lambda body: self.emit(ir.If(c, body)))

    def _attach_else(self, stmts: tuple[ir.Stmt, ...]) -> None:
        blk = self._blocks[-1]
        last = self._last_if[-1]
        if last is None or not blk or blk[-1] is not last:
            raise BuildError("else without a preceding if")
        # Descend the else-if chain to its open end.
        chain = [last]
        while len(chain[-1].orelse) == 1 and isinstance(chain[-1].orelse[0], ir.If):
            chain.append(chain[-1].orelse[0])
        if chain[-1].orelse:
            raise BuildError("if already has an else")
        new = ir.If(chain[-1].cond, chain[-1].then, stmts)
        for node in reversed(chain[:-1]):
            new = ir.If(node.cond, node.then, (new,))
        blk[-1] = new
        self._last_if[-1] = new

    def elif_(self, cond: Val | bool) -> AbstractContextManager[None]:
        c = self._cond(cond).node
        return _Block(self, None, lambda body: self._attach_else((ir.If(c, body),)))

    def else_(self) -> AbstractContextManager[None]:
        return _Block(self, None, self._attach_else)

    def for_range(
        self, name: str, start: Val | int, end: Val | int, step: Val | int = 1, shift=False
    ) -> AbstractContextManager[Val]:
        """``for (var name = start; name < end; name = name + step) { ... }`` over u32/i32
        (``name = name << step`` with ``shift``: a doubling loop); ``with`` gives the loop
        variable."""
        like: Type = u32
        for x in (start, end, step):
            if isinstance(x, Val):
                like = x.ty
                break
        s = as_val(start, like)
        i = Local(self, name, s.ty)
        init = ir.Var(name, s.ty, s.node)
        cond = (i < end).node
        update = ir.Assign(i.node, ((i << step) if shift else (i + step)).node)
        return _Block(self, i, lambda body: self.emit(ir.For(init, cond, update, body)))

    def function(
        self, name: str, params: list[tuple[str, Scalar | Vec]], ret: Scalar | Vec | None
    ) -> AbstractContextManager[tuple[Val, ...]]:
        """Define a helper ``fn``; the block's statements are its body (``with`` gives the
        parameters as values)."""
        args = tuple(Val(ir.Name(p), t) for p, t in params)
        sig = tuple(params)
        return _Block(
            self, args, lambda body: self.functions.append(ir.Function(name, sig, ret, body))
        )

    def return_(self, value: Val | Num) -> None:
        self.emit(ir.Return(as_val(value).node))

    def fn_call(self, name: str, *args: Val | Num) -> Val:
        fn = next((f for f in self.functions if f.name == name), None)
        if fn is None:
            raise BuildError(f"undefined function '{name}'")
        vals = [as_val(a, t) for a, (_, t) in zip(args, fn.params)]
        return Val(ir.FnCall(name, tuple(v.node for v in vals)), fn.ret)

    # -- result --
    def build(
        self,
        dispatch: ir.Dispatch | None = None,
        doc: str = "",
        *,
        extents: dict[str, Val | ir.Expr | int] | None = None,
        requires: dict[str, Val | ir.Expr] | None = None,
    ) -> ir.Kernel:
        """The verified kernel, then without the arithmetic ``let``s nothing reads
        (:func:`kvdsl.ir.dead.drop_dead_lets`: after verifying, so an ill-formed ``let`` is an
        error even where nothing reads it; dropping unread arithmetic keeps a kernel valid).

        ``extents`` gives its host-side contract (:attr:`kvdsl.ir.tree.Kernel.extents`): for
        every binding, the least number of elements a host's buffer must hold, an expression of
        params fields, consts and integers (``largest("seqlens_k")``: the largest value of an
        integer input); ``requires`` maps a sentence to a condition the params must meet. Every
        host of the kernel (:func:`kvdsl.runtime.run`, ``kvdsl run``, the interpreter's
        callers) then refuses a buffer too short for the params, naming it, before a dispatch
        the GPU would run on clamped or dropped accesses."""
        if self._open:
            self._close_open(1)
        if len(self._blocks) != 1:
            raise BuildError("build() inside an open block")
        fields = tuple(self.param_fields.items())
        params = Struct("Params", fields) if fields else None
        kernel = ir.Kernel(
            name=self.name,
            bindings=tuple(self.bindings),
            params=params,
            consts=tuple(self.consts),
            functions=tuple(self.functions),
            workgroup_size=self.workgroup_size,
            builtins=tuple(sorted(self.builtins.items(), key=_builtin_order)),
            body=tuple(self._blocks[0]),
            dispatch=dispatch,
            doc=tuple(doc.splitlines()),
            workgroup_size_name=self.workgroup_size_name,
            workgroup_vars=tuple(self.workgroup_vars),
        )
        kernel = verify(kernel)
        body = drop_dead_lets(kernel.body)
        kernel = kernel if body is kernel.body else dataclasses.replace(kernel, body=body)
        if extents is None and requires is None:
            return kernel
        return with_contract(kernel, extents or {}, requires or {})


def largest(binding: str) -> Val:
    """The largest value of integer input ``binding`` (``-1`` when it is empty), an ``i32``,
    for an extent or a requirement: a pool sized by the largest page id of its table, say (the
    host evaluates either in exact integers)."""
    return Val(ir.Member(ir.Name(binding), "max"), i32)


#: What a host-side expression may hold: integer arithmetic the host evaluates exactly.
_HOST_OPS = {Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.MOD, Op.LT, Op.LE, Op.GT, Op.GE, Op.EQ, Op.NE}
_HOST_OPS |= {Op.LAND, Op.LOR}
_HOST_CALLS = {Op.MIN, Op.MAX, Op.SELECT}


def _host_expr(kernel: ir.Kernel, what: str, x: Val | ir.Expr | int) -> ir.Expr:
    """``x`` as a host-side expression of ``kernel``; a :class:`BuildError` naming ``what``
    where it reads anything but params fields, consts, integers and ``largest(binding)``."""
    if isinstance(x, bool) or not isinstance(x, (Val, int, *ir.Expr.__args__)):
        raise BuildError(f"{what}: {describe(x)} is neither a whole number nor an expression")
    if isinstance(x, Val):
        e = x.node
    elif isinstance(x, int):
        e = ir.Lit(x, i32 if x < 0 else u32)
    else:
        e = x

    def ok(n: ir.Expr) -> bool:
        match n:
            case ir.Lit(value, _):
                return isinstance(value, int)
            case ir.Name(name):
                return kernel.const(name) is not None
            case ir.Member(ir.Name("params"), _):
                return True
            case ir.Member(ir.Name(name), "max"):
                return kernel.binding(name) is not None
            case ir.Binary(op, a, b):
                return op in _HOST_OPS and ok(a) and ok(b)
            case ir.Call(op, args):
                return op in _HOST_CALLS and all(ok(a) for a in args)
        return False

    if not ok(e):
        raise BuildError(
            f"{what}: {show(e)} is not a host-side expression: integer arithmetic over params "
            "fields, consts, integers and largest(binding), which the host evaluates before a "
            "dispatch (no builtin, local or buffer element)"
        )
    return e


def with_contract(
    kernel: ir.Kernel,
    extents: dict[str, Val | ir.Expr | int],
    requires: dict[str, Val | ir.Expr] | None = None,
) -> ir.Kernel:
    """``kernel`` with its host-side contract (:meth:`KernelBuilder.build`'s ``extents`` and
    ``requires``): an extent for every binding and none for a name that is no binding."""
    names = [b.name for b in kernel.bindings]
    missing = [n for n in names if n not in extents]
    if missing:
        raise BuildError(
            f"kernel {kernel.name}: extents: no extent for binding {', '.join(map(repr, missing))} "
            "(every binding needs its least element count)"
        )
    unknown = [n for n in extents if n not in names]
    if unknown:
        raise BuildError(
            f"kernel {kernel.name}: extents: {', '.join(map(repr, unknown))} is no binding; the "
            f"bindings are {', '.join(names)}"
        )
    return dataclasses.replace(
        kernel,
        extents=tuple((n, _host_expr(kernel, f"extent of '{n}'", e)) for n, e in extents.items()),
        requires=tuple(
            (text, _host_expr(kernel, f"requirement '{text}'", c))
            for text, c in (requires or {}).items()
        ),
    )


class _Block:
    """What ``with kb.if_(...)`` (``elif_``, ``else_``, ``for_range``, ``function``) manages:
    entering opens a block and gives ``value``; a normal exit closes it and hands its statements
    to ``finish``, an exception closes it and builds nothing. A class rather than a
    ``@contextmanager`` generator: kernels open hundreds of blocks, and a class enters and
    leaves one with less work."""

    __slots__ = ("kb", "value", "finish", "body")

    def __init__(self, kb: KernelBuilder, value: object, finish: Callable[[tuple], None]) -> None:
        self.kb = kb
        self.value = value
        self.finish = finish

    def __enter__(self) -> Any:
        self.body = body = []
        kb = self.kb
        kb._blocks.append(body)
        kb._last_if.append(None)
        return self.value

    def __exit__(self, exc_type: object, exc: object, tb: object) -> bool:
        kb = self.kb
        if kb._open and exc_type is None:
            kb._close_open(len(kb._blocks))
        kb._blocks.pop()
        kb._last_if.pop()
        if exc_type is None:
            self.finish(tuple(self.body))
        return False


def _builtin_order(item: tuple[str, str]) -> int:
    return list(ir.BUILTIN_INPUTS.values()).index(item[0])
