"""Build kernels with Python operators and context managers.

A :class:`Val` is a typed handle on an IR expression. Arithmetic, bitwise and comparison
operators build :class:`~kvdsl.ir.nodes.Binary` nodes and check operand types at once; a plain
Python number adapts to the other operand's type, like WGSL's abstract numerics. Python ``==``
keeps its meaning, so equality is spelt ``a.eq(b)`` / ``a.ne(b)``.

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
from math import copysign
from typing import Any, Callable, Iterator, Union

from kvdsl.ir import ops
from kvdsl.ir.nodes import (
    BUILTIN_INPUTS,
    builtin_type,
    Assign,
    Barrier,
    Binary,
    Binding,
    Call,
    Comment,
    Const,
    Construct,
    Convert,
    Dispatch,
    Expr,
    FnCall,
    For,
    Function,
    If,
    Index,
    Kernel,
    Let,
    Lit,
    Member,
    Name,
    Return,
    Stmt,
    Unary,
    Var,
    WorkgroupVar,
)
from kvdsl.ir.dead import drop_dead_lets
from kvdsl.ir.ops import Op
from kvdsl.ir.types import Array, Scalar, Struct, Type, Vec, bool_, f32, i32, u32
from kvdsl.ir.verify import VerifyError, literal_ok, verify

Num = Union[int, float, bool]


class BuildError(VerifyError):
    """An expression or statement the builder cannot make (mixed types, bad literal ...)."""


def lit(value: Num, ty: Scalar) -> Val:
    """A literal of type ``ty``; rejects values the type cannot hold."""
    if ty is u32 or ty is i32:  # most literals: no float conversion to make
        if not literal_ok(value, ty):
            raise BuildError(f"literal {value!r} does not fit {ty}")
        return Val(Lit(value, ty), ty)
    if type(value) is not float and ty.is_float and isinstance(value, int):  # floats skip it
        if not isinstance(value, bool):
            value = float(value)
    if type(value) is float and (ty is f32 or ty.is_float):
        # -0.0 equals 0.0 (and hashes alike): the sign keeps their entries apart.
        key = (ty.name, value, copysign(1.0, value))
        held = _FLOAT_HELD.get(key)
        if held is None:
            if not literal_ok(value, ty):
                raise BuildError(f"literal {value!r} does not fit {ty}")
            held = _float_held(value, ty)
            if len(_FLOAT_HELD) < _FLOAT_HELD_MAX:
                _FLOAT_HELD[key] = held
        return Val(Lit(held, ty), ty)
    if not literal_ok(value, ty):
        raise BuildError(f"literal {value!r} does not fit {ty}")
    if ty.is_float:
        value = _float_held(value, ty)
    return Val(Lit(value, ty), ty)


def _float_held(value: Num, ty: Scalar) -> float:
    # f32: the shortest decimal of the value the type holds, what its WGSL text reads back as.
    # f16: the value itself, which the printer spells exactly: WGSL lets an implementation round
    # an f16 literal's decimal either way, and Tint rounds it toward zero where naga rounds to
    # nearest (31.62h is 31.609375h to Tint, 31.625h to naga; run 95).
    v = ty.dtype.type(value)
    return float(v) if ty.name == "f16" else float(str(v))


# (type name, value, sign) -> the value a float type holds: numpy's conversion and str() cost
# microseconds per literal, and kernels repeat a few constants (0.0, 1.0, eps ...) many times.
_FLOAT_HELD: dict[tuple[str, float, float], float] = {}
_FLOAT_HELD_MAX = 4096


def _default_type(value: Num) -> Scalar:
    if isinstance(value, bool):
        return bool_
    return f32 if isinstance(value, float) else i32


def as_val(x: Val | Num, like: Type | None = None) -> Val:
    """``x`` as a Val; a Python number takes the scalar type of ``like`` (WGSL abstract numerics)."""
    if isinstance(x, Val):
        return x
    if type(x) is int:  # most literals: an index or a count, the range checks inline
        if like is u32:
            if 0 <= x < 4294967296:
                return Val(Lit(x, u32), u32)
        elif like is i32:
            if -2147483648 <= x < 2147483648:
                return Val(Lit(x, i32), i32)
    elif type(x) is float and like is f32:
        return lit(x, f32)
    if isinstance(x, (bool, int, float)):
        ty = like.scalar if isinstance(like, (Scalar, Vec)) else _default_type(x)
        if isinstance(x, float) and ty.is_int:
            raise BuildError(f"float literal {x!r} cannot become {ty}")
        return lit(x, ty)
    raise BuildError(f"{x!r} is not an IR value")


def _typed(op: Op, node: Expr, args: tuple[Type, ...]) -> Val:
    try:
        return Val(node, op._row.typing(args))
    except ops.OpTypeError as err:
        from kvdsl.ir.verify import show

        raise BuildError(f"{show(node)}: {ops.info(op).spelling} {err}") from None


def binary(op: Op, a: Val | Num, b: Val | Num) -> Val:
    """``a op b`` with literal adaptation; a shift amount literal is always u32."""
    if op is Op.SHL or op is Op.SHR:
        a = as_val(a)  # a literal shifted is i32, as WGSL's abstract int becomes
        b = as_val(b, u32 if not isinstance(a.ty, Vec) else Vec(a.ty.n, u32))
    elif isinstance(a, Val):
        if not isinstance(b, Val):
            b = as_val(b, a.ty)
    else:
        b = as_val(b)
        a = as_val(a, b.ty)
    return _typed(op, Binary(op, a.node, b.node), (a.ty, b.ty))


def call(op: Op, *args: Val | Num) -> Val:
    """A builtin call; literal arguments adapt to the first typed argument (a vector's literal
    becomes the splat ``vecN<T>(x)``, as builtins take no mixed vector/scalar operands)."""
    like = None
    for a in args:
        if isinstance(a, Val) and a.ty is not bool_ and a.ty != bool_:
            like = a.ty
            break
    nodes, types = [], []
    for i, a in enumerate(args):
        if isinstance(a, Val):
            v = a
        elif op is Op.SELECT and i == 2:
            v = as_val(a, bool_)
        elif isinstance(like, Vec):
            v = construct(like, a)
        else:
            v = as_val(a, like)
        nodes.append(v.node)
        types.append(v.ty)
    return _typed(op, Call(op, tuple(nodes)), tuple(types))


def select(f: Val | Num, t: Val | Num, cond: Val | bool) -> Val:
    """WGSL ``select(f, t, cond)``: ``t`` where ``cond`` holds, else ``f`` (false first)."""
    return call(Op.SELECT, f, t, cond)


def min_(a: Val | Num, b: Val | Num) -> Val:
    return call(Op.MIN, a, b)


def max_(a: Val | Num, b: Val | Num) -> Val:
    return call(Op.MAX, a, b)


def clamp(e: Val | Num, lo: Val | Num, hi: Val | Num) -> Val:
    return call(Op.CLAMP, e, lo, hi)


def round_(x: Val) -> Val:
    return call(Op.ROUND, x)


def inverse_sqrt(x: Val) -> Val:
    return call(Op.INVERSE_SQRT, x)


def cos(x: Val) -> Val:
    return call(Op.COS, x)


def sin(x: Val) -> Val:
    return call(Op.SIN, x)


def dot(a: Val, b: Val) -> Val:
    return call(Op.DOT, a, b)


def shuffle_xor(x: Val, mask: Val | int) -> Val:
    """WGSL ``subgroupShuffleXor(x, mask)``: ``x`` as the invocation of this subgroup whose
    subgroup lane is this one's xor ``mask`` holds it (``mask`` uniform, below the subgroup size;
    the module then enables ``subgroups``)."""
    return call(Op.SUBGROUP_SHUFFLE_XOR, x, as_val(mask, u32))


def pack2x16float(x: Val) -> Val:
    """WGSL ``pack2x16float(x)``: the two f32 lanes of ``x`` as f16 halves of one u32 (lane 0 in
    the low bits); needs no ``enable f16;``."""
    return call(Op.PACK2X16FLOAT, x)


def unpack2x16float(w: Val) -> Val:
    """WGSL ``unpack2x16float(w)``: the two f16 halves of the u32 ``w`` as a ``vec2<f32>``."""
    return call(Op.UNPACK2X16FLOAT, w)


def convert(ty: Scalar | Vec, x: Val | Num) -> Val:
    """``ty(x)``; a conversion to the value's own type is the value itself."""
    x = as_val(x, ty)
    if x.ty is ty or x.ty == ty:
        return x
    ok = (isinstance(ty, Scalar) and isinstance(x.ty, Scalar)) or (
        isinstance(ty, Vec) and isinstance(x.ty, Vec) and x.ty.n == ty.n
    )
    if not ok:
        raise BuildError(f"cannot convert {x.ty} to {ty}")
    return Val(Convert(ty, x.node), ty)


def construct(ty: Vec | Array, *args: Val | Num) -> Val:
    """``vecN<T>(...)`` or ``array<T, N>(...)`` from components."""
    vals = [as_val(a, ty.elem) for a in args]
    # One scalar for a vector is WGSL's splat vecN<T>(x); verify checks the components.
    return Val(Construct(ty, tuple(v.node for v in vals)), ty)


def _operator(op: Op, doc: str | None = None) -> Callable[[Val, Val | Num], Val]:
    """``Val``'s method for ``a op b``: :func:`binary`, with its commonest cases (another value, a
    u32 literal beside a u32) inline; any operand it would reject goes through it for the error."""
    typing = op._row.typing

    def method(self: Val, o: Val | Num) -> Val:
        try:
            if isinstance(o, Val):
                return Val(Binary(op, self.node, o.node), typing((self.ty, o.ty)))
            if type(o) is int and self.ty is u32 and 0 <= o < 4294967296:
                return Val(Binary(op, self.node, Lit(o, u32)), typing((u32, u32)))
        except ops.OpTypeError:
            pass
        return binary(op, self, o)

    method.__doc__ = doc
    return method


class Val:
    """A typed IR expression with Python operators."""

    __slots__ = ("node", "ty")

    def __init__(self, node: Expr, ty: Type) -> None:
        self.node = node
        self.ty = ty

    def __repr__(self) -> str:
        return f"Val({self.node!r}: {self.ty})"

    __hash__ = None  # type: ignore[assignment]

    def __bool__(self) -> bool:
        raise BuildError("an IR value has no Python truth value: use kb.if_() or select()")

    def __iter__(self) -> Iterator[Val]:
        # Without this, Python would iterate through __getitem__ forever (v[0], v[1], ...).
        raise BuildError("an IR value is not a Python sequence: index it (v[i], v.x) instead")

    def __contains__(self, o: object) -> bool:
        raise BuildError("`in` on an IR value would iterate it: compare elements with .eq()")

    def __eq__(self, o: object) -> bool:  # type: ignore[override]
        raise BuildError("`==` on IR values would compare Python objects: use a.eq(b)")

    def __ne__(self, o: object) -> bool:  # type: ignore[override]
        raise BuildError("`!=` on IR values would compare Python objects: use a.ne(b)")

    # arithmetic
    __add__ = _operator(Op.ADD)

    def __radd__(self, o):
        return binary(Op.ADD, o, self)

    __sub__ = _operator(Op.SUB)

    def __rsub__(self, o):
        return binary(Op.SUB, o, self)

    __mul__ = _operator(Op.MUL)

    def __rmul__(self, o):
        return binary(Op.MUL, o, self)

    __truediv__ = _operator(Op.DIV)

    def __rtruediv__(self, o):
        return binary(Op.DIV, o, self)

    __floordiv__ = __truediv__
    __rfloordiv__ = __rtruediv__

    __mod__ = _operator(Op.MOD)

    def __rmod__(self, o):
        return binary(Op.MOD, o, self)

    __and__ = _operator(Op.AND)

    def __rand__(self, o):
        return binary(Op.AND, o, self)

    __or__ = _operator(Op.OR)

    def __ror__(self, o):
        return binary(Op.OR, o, self)

    __xor__ = _operator(Op.XOR)

    __lshift__ = _operator(Op.SHL)

    __rshift__ = _operator(Op.SHR)

    def __neg__(self):
        return _typed(Op.NEG, Unary(Op.NEG, self.node), (self.ty,))

    def __invert__(self):
        op = Op.NOT if self.ty == bool_ else Op.BITNOT
        return _typed(op, Unary(op, self.node), (self.ty,))

    # comparisons (== and != stay Python's: use eq / ne)
    __lt__ = _operator(Op.LT)

    __le__ = _operator(Op.LE)

    __gt__ = _operator(Op.GT)

    __ge__ = _operator(Op.GE)

    eq = _operator(Op.EQ)

    ne = _operator(Op.NE)

    land = _operator(Op.LAND, "Short-circuit ``self && o``.")

    lor = _operator(Op.LOR, "Short-circuit ``self || o``.")

    def to(self, ty: Scalar | Vec) -> Val:
        """Convert to ``ty``."""
        return convert(ty, self)

    # access
    def __getitem__(self, index: Val | int) -> Val:
        if not isinstance(self.ty, (Array, Vec)):
            raise BuildError(f"cannot index a value of type {self.ty}")
        idx = as_val(index, u32)
        return Val(Index(self.node, idx.node), self.ty.elem)

    def member(self, name: str) -> Val:
        """A params field or a swizzle (``v.member('xy')``)."""
        if isinstance(self.ty, Struct):
            ft = self.ty.field(name)
            if ft is None:
                raise BuildError(f"{self.ty} has no field '{name}'")
            return Val(Member(self.node, name), ft)
        if isinstance(self.ty, Vec):
            if len(name) == 1 and "xyzw".find(name) in range(self.ty.n):  # one component
                return Val(Member(self.node, name), self.ty.elem)
            if any("xyzw".find(c) not in range(self.ty.n) for c in name) or not 0 < len(name) <= 4:
                raise BuildError(f"invalid swizzle '{name}' of {self.ty}")
            ty = self.ty.elem if len(name) == 1 else Vec(len(name), self.ty.elem)
            return Val(Member(self.node, name), ty)
        raise BuildError(f"{self.ty} has no members")

    @property
    def x(self) -> Val:
        return self.member("x")

    @property
    def y(self) -> Val:
        return self.member("y")

    @property
    def z(self) -> Val:
        return self.member("z")

    @property
    def w(self) -> Val:
        return self.member("w")


class Buffer:
    """A storage binding: ``buf[i]`` loads, ``buf[i] = v`` stores (in the current block)."""

    def __init__(self, kb: KernelBuilder, binding: Binding) -> None:
        self._kb = kb
        self.binding = binding

    def __getitem__(self, index: Val | int) -> Val:
        idx = as_val(index, u32)
        return Val(Index(Name(self.binding.name), idx.node), self.binding.elem)

    def __setitem__(self, index: Val | int, value: Val | Num) -> None:
        target = self[index]
        value = as_val(value, target.ty)
        if value.ty is not target.ty and value.ty != target.ty:
            raise BuildError(
                f"cannot store {value.ty} into {self.binding.name} of {self.binding.elem}"
            )
        self._kb.emit(Assign(target.node, value.node))


class Local(Val):
    """A function-scope ``var``: assign with :meth:`set`, elements with ``v[i] = x``."""

    __slots__ = ("_kb",)

    def __init__(self, kb: KernelBuilder, name: str, ty: Type) -> None:
        super().__init__(Name(name), ty)
        self._kb = kb

    def set(self, value: Val | Num, op: Op | None = None) -> None:
        """``self = value`` or, with ``op``, ``self op= value``."""
        v = as_val(value, self.ty)
        if op is not None:
            binary(op, self, v)  # type check
        elif v.ty is not self.ty and v.ty != self.ty:
            raise BuildError(f"cannot assign {v.ty} to var {self.node.name}: {self.ty}")
        self._kb.emit(Assign(self.node, v.node, op))

    def __setitem__(self, index: Val | int, value: Val | Num) -> None:
        target = self[index]
        v = as_val(value, target.ty)
        if v.ty is not target.ty and v.ty != target.ty:
            raise BuildError(f"cannot store {v.ty} into {self.node.name}[] of {target.ty}")
        self._kb.emit(Assign(target.node, v.node))


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


class KernelBuilder:
    """Collects a kernel's declarations and statements; :meth:`build` verifies and returns it."""

    def __init__(self, name: str, workgroup_size: int | tuple[int, int, int] = 64) -> None:
        self.name = name
        wg = workgroup_size if isinstance(workgroup_size, tuple) else (workgroup_size, 1, 1)
        self.workgroup_size = wg
        self.workgroup_size_name: str | None = None
        self.bindings: list[Binding] = []
        self.param_fields: dict[str, Scalar | Vec] = {}  # in declaration order
        self.consts: list[Const] = []
        self.functions: list[Function] = []
        self.workgroup_vars: list[WorkgroupVar] = []
        # Workgroup vars whose users end every use with a barrier (workgroup_var's ``fenced``).
        self.fenced: set[str] = set()
        self.builtins: dict[str, str] = {}
        self.doc: list[str] = []
        self._blocks: list[list[Stmt]] = [[]]
        self._last_if: list[If | None] = [None]
        # Blocks entered by open(): (depth of the block they stand in, the block, before_close).
        self._open: list[tuple[int, _Block, Callable[[], None] | None]] = []

    # -- declarations --
    def const(self, name: str, ty: Scalar, value: Num | Val, comment: str = "") -> Val:
        """A module ``const``; returns a handle naming it."""
        v = as_val(value, ty)
        self.consts.append(Const(name, ty, v.node, comment))
        return Val(Name(name), ty)

    def workgroup_const(self, name: str = "WG") -> Val:
        """Declare the x workgroup size as a const and spell ``@workgroup_size`` with it."""
        self.workgroup_size_name = name
        return self.const(name, u32, self.workgroup_size[0])

    def binding(
        self, name: str, elem: Scalar | Vec, access: str = "read", data: Scalar | None = None
    ) -> Buffer:
        """A storage binding, numbered in declaration order; ``data``: the host array's scalar
        type when it is not the element's (see :class:`~kvdsl.ir.nodes.Binding`)."""
        b = Binding(name, elem, access, data)
        self.bindings.append(b)
        return Buffer(self, b)

    def workgroup_var(self, name: str, ty: Array, fenced: bool = False) -> Shared:
        """A module ``var<workgroup> name: array<T, N>;`` shared by each workgroup's
        invocations; index it to load, assign ``w[i] = x`` to store. ``fenced``: its users end
        every use with a barrier, so a walk that loops over the kernel's program needs no barrier
        of its own before the next trip reuses it (:attr:`fenced`)."""
        if not isinstance(ty, Array):
            raise BuildError(f"workgroup var {name}: type {ty} is not a fixed-size array")
        self.workgroup_vars.append(WorkgroupVar(name, ty))
        if fenced:
            self.fenced.add(name)
        return Shared(self, name, ty)

    def param(self, name: str, ty: Scalar | Vec = u32) -> Val:
        """A field of the uniform params struct (declared on first use, in order)."""
        ty = self.param_fields.setdefault(name, ty)
        return Val(Member(Name("params"), name), ty)

    def _builtin(self, pname: str) -> Val:
        builtin = self.builtins.setdefault(pname, _BUILTIN_OF[pname])
        return Val(Name(pname), builtin_type(builtin))

    @property
    def gid(self) -> Val:
        """``@builtin(global_invocation_id)``."""
        return self._builtin("gid")

    @property
    def lid(self) -> Val:
        """``@builtin(local_invocation_id)``."""
        return self._builtin("lid")

    @property
    def wid(self) -> Val:
        """``@builtin(workgroup_id)``."""
        return self._builtin("wid")

    @property
    def nwg(self) -> Val:
        """``@builtin(num_workgroups)``."""
        return self._builtin("nwg")

    @property
    def subgroup_size(self) -> Val:
        """``@builtin(subgroup_size)`` (u32, the same for every invocation; enables subgroups)."""
        return self._builtin("sg")

    # -- statements --
    def emit(self, stmt: Stmt) -> None:
        """Append a statement to the innermost open block."""
        self._blocks[-1].append(stmt)
        self._last_if[-1] = stmt if isinstance(stmt, If) else None

    def let(self, name: str, value: Val | Num) -> Val:
        v = value if isinstance(value, Val) else as_val(value)
        self._blocks[-1].append(Let(name, v.node))  # self.emit(), inline: lets are many
        self._last_if[-1] = None
        return Val(Name(name), v.ty)

    def var(self, name: str, ty: Scalar | Vec | Array, init: Val | Num | None = None) -> Local:
        node = None if init is None else as_val(init, ty).node
        self.emit(Var(name, ty, node))
        return Local(self, name, ty)

    def comment(self, text: str) -> None:
        for line in text.splitlines():
            self._blocks[-1].append(Comment(line))  # self.emit(), inline
            self._last_if[-1] = None

    def ret(self) -> None:
        self.emit(Return())

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
        self.emit(Barrier())

    @contextmanager
    def _block(self) -> Iterator[list[Stmt]]:
        """A bare block whose statements are collected and not emitted (tests use it); the
        public blocks are :class:`_Block`s."""
        body: list[Stmt] = []
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
        return _Block(self, None, lambda body: self.emit(If(c, body)))

    def _attach_else(self, stmts: tuple[Stmt, ...]) -> None:
        blk = self._blocks[-1]
        last = self._last_if[-1]
        if last is None or not blk or blk[-1] is not last:
            raise BuildError("else without a preceding if")
        # Descend the else-if chain to its open end.
        chain = [last]
        while len(chain[-1].orelse) == 1 and isinstance(chain[-1].orelse[0], If):
            chain.append(chain[-1].orelse[0])
        if chain[-1].orelse:
            raise BuildError("if already has an else")
        new = If(chain[-1].cond, chain[-1].then, stmts)
        for node in reversed(chain[:-1]):
            new = If(node.cond, node.then, (new,))
        blk[-1] = new
        self._last_if[-1] = new

    def elif_(self, cond: Val | bool) -> AbstractContextManager[None]:
        c = self._cond(cond).node
        return _Block(self, None, lambda body: self._attach_else((If(c, body),)))

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
        init = Var(name, s.ty, s.node)
        cond = (i < end).node
        update = Assign(i.node, ((i << step) if shift else (i + step)).node)
        return _Block(self, i, lambda body: self.emit(For(init, cond, update, body)))

    def function(
        self, name: str, params: list[tuple[str, Scalar | Vec]], ret: Scalar | Vec | None
    ) -> AbstractContextManager[tuple[Val, ...]]:
        """Define a helper ``fn``; the block's statements are its body (``with`` gives the
        parameters as values)."""
        args = tuple(Val(Name(p), t) for p, t in params)
        sig = tuple(params)
        return _Block(
            self, args, lambda body: self.functions.append(Function(name, sig, ret, body))
        )

    def return_(self, value: Val | Num) -> None:
        self.emit(Return(as_val(value).node))

    def fn_call(self, name: str, *args: Val | Num) -> Val:
        fn = next((f for f in self.functions if f.name == name), None)
        if fn is None:
            raise BuildError(f"undefined function '{name}'")
        vals = [as_val(a, t) for a, (_, t) in zip(args, fn.params)]
        return Val(FnCall(name, tuple(v.node for v in vals)), fn.ret)

    # -- result --
    def build(self, dispatch: Dispatch | None = None, doc: str = "") -> Kernel:
        """The verified kernel, then without the arithmetic ``let``s nothing reads
        (:func:`kvdsl.ir.dead.drop_dead_lets`: after verifying, so an ill-formed ``let`` is an
        error even where nothing reads it; dropping unread arithmetic keeps a kernel valid)."""
        if self._open:
            self._close_open(1)
        if len(self._blocks) != 1:
            raise BuildError("build() inside an open block")
        fields = tuple(self.param_fields.items())
        params = Struct("Params", fields) if fields else None
        kernel = Kernel(
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
        return kernel if body is kernel.body else dataclasses.replace(kernel, body=body)


_BUILTIN_OF = {v: k for k, v in BUILTIN_INPUTS.items()}  # parameter name -> builtin


class _Block:
    """What ``with kb.if_(...)`` (``elif_``, ``else_``, ``for_range``, ``function``) manages:
    entering opens a block and gives ``value``; a normal exit closes it and hands its statements
    to ``finish``, an exception closes it and builds nothing. A class rather than a
    ``@contextmanager`` generator: kernels open hundreds of blocks, each ~0.5 us cheaper so."""

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
    return list(BUILTIN_INPUTS.values()).index(item[0])
