"""Expression evaluation: the value of an expression on the lanes of a mask, through the op
table, with the shortcuts that keep it cheap (uniform values, expressions of literals, consts and
params computed once, integer operators in place over fresh operands) and helper calls inlined.

See :mod:`kvdsl.interp` (Values; Operators and builtins; Conversions) for the semantics.
"""

from __future__ import annotations

import numpy as np

from kvdsl.ir import tree as ir
from kvdsl.ir import ops
from kvdsl.ir.ops import Op
from kvdsl.ir.types import HANDLES, Array, Mat, Struct, held_as_words
from kvdsl.ir.show import show
from kvdsl.interp.errors import InterpError
from kvdsl.interp.memory import Flat, Row
from kvdsl.interp.scope import Frame, Held, PtrValue, Slot
from kvdsl.interp.values import (
    COMPONENTS,
    ArrayValue,
    Mask,
    broadcast,
    convert,
    empty,
    is_uniform,
    m_and,
    m_andnot,
)

_INT_FAST = {
    Op.ADD: np.add,
    Op.SUB: np.subtract,
    Op.MUL: np.multiply,
    Op.LT: np.less,
    Op.LE: np.less_equal,
    Op.GT: np.greater,
    Op.GE: np.greater_equal,
    Op.EQ: np.equal,
    Op.NE: np.not_equal,
    Op.AND: np.bitwise_and,
    Op.OR: np.bitwise_or,
    Op.XOR: np.bitwise_xor,
    Op.MIN: np.minimum,
    Op.MAX: np.maximum,
}
# Integer operators that may write their result over an operand (elementwise, same dtype out).
_IN_PLACE = {
    op: _INT_FAST[op] for op in (Op.ADD, Op.SUB, Op.MUL, Op.AND, Op.OR, Op.XOR, Op.MIN, Op.MAX)
}
# Binary operators whose result may be an operand itself (short-circuit logic returns its left
# side when the right side need not run); every other one makes a new array.
_NOT_FRESH = (Op.LAND, Op.LOR)
# Subgroup reductions and scans: the operator folded over a subgroup's active invocations in
# lane order, and its identity.
_FOLDS = {
    Op.SUBGROUP_ADD: np.add,
    Op.SUBGROUP_MUL: np.multiply,
    Op.SUBGROUP_MIN: np.minimum,
    Op.SUBGROUP_MAX: np.maximum,
    Op.SUBGROUP_AND: np.bitwise_and,
    Op.SUBGROUP_OR: np.bitwise_or,
    Op.SUBGROUP_XOR: np.bitwise_xor,
    Op.SUBGROUP_EXCLUSIVE_ADD: np.add,
    Op.SUBGROUP_INCLUSIVE_ADD: np.add,
    Op.SUBGROUP_EXCLUSIVE_MUL: np.multiply,
    Op.SUBGROUP_INCLUSIVE_MUL: np.multiply,
}
_SCANS = {
    Op.SUBGROUP_EXCLUSIVE_ADD: True,
    Op.SUBGROUP_INCLUSIVE_ADD: False,
    Op.SUBGROUP_EXCLUSIVE_MUL: True,
    Op.SUBGROUP_INCLUSIVE_MUL: False,
}
# Every subgroup builtin but subgroupShuffleXor, which has its own path (shuffle_xor).
_SUBGROUP = ops.SUBGROUP_OPS - {Op.SUBGROUP_SHUFFLE_XOR}


def _identity(op: Op, dtype: np.dtype):
    if op in (Op.SUBGROUP_MUL, Op.SUBGROUP_EXCLUSIVE_MUL, Op.SUBGROUP_INCLUSIVE_MUL):
        return 1
    if op is Op.SUBGROUP_AND:
        return dtype.type(-1) if dtype.kind == "i" else np.iinfo(dtype).max
    if op is Op.SUBGROUP_MIN:
        return np.inf if dtype.kind == "f" else np.iinfo(dtype).max
    if op is Op.SUBGROUP_MAX:
        return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min
    return 0


class Expressions:
    """Expression evaluation, a mixin of :class:`kvdsl.interp.machine.Machine`, which holds the
    state it uses (``grid``, ``n``, ``buffers``, ``shared``, ``params``, ``module``, ``scopes``,
    ``functions``, ``builtins``, the caches ``lits``, ``_static``, ``_static_vals``) and runs
    helper bodies (``block``); loads go through :class:`kvdsl.interp.memory.Memory`."""

    def eval(self, e: ir.Expr, m: Mask):
        """The value of ``e`` on the lanes of ``m`` (other lanes hold arbitrary values)."""
        t = type(e)
        if t is ir.Binary or t is ir.Unary or t is ir.Call or t is ir.Convert or t is ir.Bitcast:
            v = self._static_vals.get(id(e))
            if v is not None:
                return v
            if self.static(e):
                v = self._static_vals[id(e)] = self._eval(e, m)
                return v
        return self._eval(e, m)

    def static(self, e: ir.Expr) -> bool:
        """Whether ``e`` is computed from literals, consts and params alone: the same value in
        every chunk and batch, so computed once (uniform, and never overwritten in place)."""
        k = id(e)
        known = self._static.get(k)
        if known is not None:
            return known
        match e:
            case ir.Lit():
                ok = True
            case ir.Name(name):
                ok = name in self.module and name not in self._locals
            case ir.Member(ir.Name("params"), _):
                ok = "params" not in self._locals
            case ir.Unary(_, x) | ir.Convert(_, x) | ir.Bitcast(_, x):
                ok = self.static(x)
            case ir.Binary(_, a, b):
                ok = self.static(a) and self.static(b)
            case ir.Call(op, args):
                ok = op not in ops.SUBGROUP_OPS and all(self.static(a) for a in args)
            case _:
                ok = False
        self._static[k] = ok
        return ok

    def _eval(self, e: ir.Expr, m: Mask):
        if self._through and id(e) in self._through:
            return self.through(e, m)
        match e:
            case Held():
                return e.value
            case ir.AddressOf(x):
                return PtrValue(*self.locate(x, m))
            case ir.Lit():
                v = self.lits.get(e)
                if v is None:
                    v = self.lits[e] = np.array([e.value], e.ty.dtype)
                return v
            case ir.Name(name):
                if self._is_builtin(name):
                    if self.builtins[name] in ("sg", "sgid", "lidx", "nsg", "sgix"):
                        return self.grid.column(self.builtins[name], 0)
                    cols = [self.grid.column(self.builtins[name], k) for k in range(3)]
                    lanes = max(c.shape[0] for c in cols)
                    return np.stack([broadcast(c, lanes) for c in cols], axis=1)
                if self._structs and (name in self.buffers or name in self.shared):
                    if b := self.struct_root(e):  # a binding read whole: n, v, cfg; or a
                        return self.struct_load(b, e, m)  # workgroup var: total, acc
                v = self.lookup(name).value
                return ArrayValue(v) if isinstance(v, ArrayValue) else v
            case ir.Unary(op, x):
                return self.apply(op, (self.eval(x, m),))
            case ir.Binary(Op.LAND | Op.LOR as op, a, b):
                return self.logic(op, a, b, m)
            case ir.Binary(op, a, b):
                x, y = self.eval(a, m), self.eval(b, m)
                f = _IN_PLACE.get(op)
                if f is not None and x.dtype == y.dtype and x.dtype.kind in "iu":
                    # A per-lane operand another integer operator just made is referenced
                    # nowhere else (uniform ones may be remembered, see :meth:`static`): the
                    # result can overwrite it instead of taking new memory.
                    fresh_a = type(a) is ir.Binary and a.op not in _NOT_FRESH and x.shape[0] > 1
                    fresh_b = type(b) is ir.Binary and b.op not in _NOT_FRESH and y.shape[0] > 1
                    if fresh_a and x.shape == y.shape or fresh_a and y.shape[0] == 1 == y.ndim:
                        return f(x, y, out=x)
                    if fresh_b and x.shape == y.shape:
                        return f(x, y, out=y)
                return self.apply(op, (x, y))
            case ir.Call(Op.SUBGROUP_SHUFFLE_XOR, (x, mask)):
                return self.shuffle_xor(self.eval(x, m), self.eval(mask, m), m, e)
            case ir.Call(op, args) if op in _SUBGROUP:
                return self.subgroup(op, tuple(self.eval(a, m) for a in args), m, e)
            case ir.Call(op, args):
                return self.apply(op, tuple(self.eval(a, m) for a in args))
            case ir.FnCall(name, args):
                fn = self.functions[name]
                return self.call(
                    fn, [self.argument(a, t, m) for a, (_, t) in zip(args, fn.params)], m
                )
            case ir.ArrayLength(name, None, True):  # the binding, or its member, p points at
                match self.lookup(name).value.chain:
                    case ir.Name(root):
                        return self.eval(ir.ArrayLength(root), m)
                    case ir.Member(ir.Name(root), member):
                        return self.eval(ir.ArrayLength(root, member), m)
                raise InterpError(f"{show(e)}: not a pointer to a runtime-sized array")
            case ir.ArrayLength(name, member) if member is not None:
                return np.array([self.runtime_length(self.buffers[name], member)], np.uint32)
            case (
                ir.TextureDimensions()
                | ir.TextureNumLayers()
                | ir.TextureNumSamples()
                | ir.TextureNumLevels()
                | ir.TextureSampleBaseClampToEdge()
                | ir.TextureLoad()
                | ir.TextureSampleLevel()
                | ir.TextureSampleCompare()
                | ir.TextureGather()
                | ir.TextureSampleGrad()
            ):
                return self.texture_expr(e, m)
            case ir.ArrayLength(name):
                b = self.buffers[name]
                per = b.binding.host_values if held_as_words(b.binding.elem) else 1
                return np.array([b.length // per], np.uint32)
            case ir.Convert(ty, x):
                return convert(self.eval(x, m), ty)
            case ir.Bitcast(ty, x):
                # The same 32 bits read as another type: a copy, so no later in-place step on
                # the result can reach the operand's array.
                return np.ascontiguousarray(self.eval(x, m)).view(ty.scalar.dtype).copy()
            case ir.Construct(ty, args):
                return self.construct(ty, [self.eval(a, m) for a in args])
            case ir.Index() | ir.Member() if self._structs and (b := self.struct_root(e)):
                return self.struct_load(b, e, m)
            case ir.Member(ir.Index(ir.Name(name), index), c) | ir.Index(
                ir.Index(ir.Name(name), index), c
            ) if (b := self._vector_buffer(name)) is not None and (
                type(e) is ir.Index or len(c) == 1
            ):
                # One component of a read_write binding's vector element, read as its scalar.
                idx = self.eval(index, m)
                lane = (
                    np.array([COMPONENTS.index(c)], np.uint32)
                    if type(e) is ir.Member
                    else self.eval(c, m)
                )
                return self.load_component(b, idx, lane, m)
            case ir.Index(ir.Name(name), index) if name in self.buffers and not self._shadowed(
                name
            ):
                want, self._want_view = self._want_view, False
                idx = self.eval(index, m)
                self._last_load = (index, m, self.scopes, idx)
                return self.load(self.buffers[name], idx, m, want)
            case ir.Index() if self.shared and (ref := self.shared_ref(e)) is not None:
                w, index, lane = ref  # one lane of a vector element reads only that lane's slot
                if type(index) is Row:  # a whole row of an array of arrays
                    return self.shared_value(w, self.row_start(w, index.row, m), m)
                lanes = None if lane is None else self.eval(lane, m)
                if type(index) is Flat:
                    return self.shared_load(w, self.flat_index(w, index, m), m, lanes)
                return self.shared_load(w, self.eval(index, m), m, lanes)
            case ir.Index(base, index):
                container = self.eval(base, m)
                idx = self.eval(index, m)
                return self.element(container, idx, m, base)
            case ir.Member(ir.Name("params"), field) if not self._shadowed("params"):
                return self.params[field]
            case ir.Member(ir.Name(name), comp) if len(comp) == 1 and self._is_builtin(name):
                return self.grid.column(self.builtins[name], COMPONENTS.index(comp))
            case ir.AtomicCall():
                return self.atomic(e, m)
            case ir.UniformLoad(p):
                self.barrier(m)
                v = self.through(ir.Deref(p), m)
                self.barrier(m)
                return v
            case ir.Member(base, comps):
                v = self.eval(base, m)
                if type(v) is dict:  # a field of frexp's, modf's or a compare-exchange's result
                    return v[comps]
                if len(comps) == 1:
                    return v[:, COMPONENTS.index(comps)]
                return v[:, [COMPONENTS.index(c) for c in comps]]
        raise InterpError(f"not an expression: {e!r}{self.where()}")

    # ---- pointers ------------------------------------------------------------------------
    def locate(self, x: ir.Expr, m: Mask) -> tuple[ir.Expr, dict[str, Slot]]:
        """The access chain of the memory ``x`` names, its indices evaluated (:class:`Held`),
        and the slots its root stands for (see :class:`PtrValue`)."""
        match x:
            case ir.Name(name):
                if (name in self.buffers or name in self.shared) and not self._shadowed(name):
                    return x, {}
                self._pointer_ids += 1
                hidden = f"\0{name}#{self._pointer_ids}"  # no WGSL name has a NUL
                return ir.Name(hidden), {hidden: self.lookup(name)}
            case ir.Deref(p):
                ptr = self.eval(p, m)
                return ptr.chain, ptr.hidden
            case ir.Index(base, index):
                chain, hidden = self.locate(base, m)
                return ir.Index(chain, Held(self.eval(index, m))), hidden
            case ir.Member(base, name):
                chain, hidden = self.locate(base, m)
                return ir.Member(chain, name), hidden
        raise InterpError(f"&{show(x)}: not memory{self.where()}")

    def at(self, hidden: dict[str, Slot], run):
        """``run()`` with only the module's names and ``hidden`` in sight: a pointer's chain
        means the memory it was taken of, whatever the current scope declares."""
        saved = self.scopes
        self.scopes = [self.module, hidden]
        try:
            return run()
        finally:
            self.scopes = saved

    def through(self, e: ir.Expr, m: Mask):
        """The value of ``*p``, ``(*p)[i]`` or ``(*p).x``: the chain read where it points."""
        chain, hidden = self.locate(e, m)
        if type(chain) is ir.Name and chain.name in self.shared:  # a whole workgroup array
            w = self.shared[chain.name]
            return self.struct_load(w, chain, m) if w.whole else self.shared_value(w, None, m)
        return self.at(hidden, lambda: self.eval(chain, m))

    def element(self, container, idx: np.ndarray, m: Mask, base: ir.Expr):
        """Element ``idx`` of an array or vector value."""
        length = len(container) if isinstance(container, ArrayValue) else container.shape[1]
        self._oob(show(base), idx, length, m)
        if is_uniform(idx):
            i = int(idx[0])
            return container[i] if isinstance(container, ArrayValue) else container[:, i]
        safe = np.clip(idx, 0, length - 1).astype(np.intp)
        if isinstance(container, ArrayValue) and type(container[0]) is dict:
            # an array of structs: each member gathered across the elements
            return {
                k: self.element(ArrayValue(x[k] for x in container), idx, m, base)
                for k in container[0]
            }
        if isinstance(container, ArrayValue) and type(container[0]) is ArrayValue:
            # an array of arrays: each inner position gathered across the outer elements
            inner = len(container[0])
            return ArrayValue(
                self.element(ArrayValue(x[k] for x in container), idx, m, base)
                for k in range(inner)
            )
        if isinstance(container, ArrayValue):
            lanes = max(max(x.shape[0] for x in container), self.n)
            stacked = np.stack([broadcast(x, lanes) for x in container])
            return stacked[safe, self.grid.lanes]
        return broadcast(container, self.n)[self.grid.lanes, safe]

    def shuffle_xor(self, x: np.ndarray, mask: np.ndarray, m: Mask, e: ir.Expr) -> np.ndarray:
        """``subgroupShuffleXor``: each lane of ``m`` gets ``x`` of the invocation whose
        subgroup lane is its own xor ``mask`` (see *Subgroups* in :mod:`kvdsl.interp`)."""
        grid, size = self.grid, self.grid.subgroup_size
        lanes = grid.active(m)
        if len(lanes) == 0:
            return x
        me = grid.original(lanes)
        local = me % grid.per_group
        # The mask must be uniform, which WGSL's uniformity analysis asks of it (the verifier
        # runs it): the same in every invocation of a subgroup; subgroups (and workgroups) may
        # differ. A mask held per lane is checked subgroup by subgroup.
        k = mask if is_uniform(mask) else mask[lanes]
        if not is_uniform(mask):
            runs = -(-grid.per_group // size)
            sub = me // grid.per_group * runs + local // size  # dispatch-wide subgroup index
            order = np.argsort(sub, kind="stable")
            same = sub[order][1:] == sub[order][:-1]
            split = np.flatnonzero(same & (k[order][1:] != k[order][:-1]))
            if split.size:
                i = int(order[split[0] + 1])
                raise InterpError(
                    f"{show(e)}: the mask differs within a subgroup: {grid.describe(int(me[i]))} "
                    f"has {int(k[i])}, another of its subgroup {int(k[order[split[0]]])}"
                    f"{self.where()}"
                )
        big = np.flatnonzero(k >= size)
        if big.size:
            raise InterpError(
                f"{show(e)}: mask {int(k[big[0]])} is not below the subgroup size {size}"
                f"{self.where()}"
            )
        # Subgroups are aligned runs of ``size`` local indices (the last one short where the
        # workgroup is not a whole number of them) and ``k < size``: the partner is in the same
        # run, at local index ``local ^ k``, if the workgroup has it.
        partner = local ^ k
        past = partner >= grid.per_group
        if past.any():
            i = int(np.flatnonzero(past)[0])
            raise InterpError(
                f"{show(e)}: {grid.describe(int(me[i]))} reads local invocation {int(partner[i])}, "
                f"past the workgroup's {grid.per_group}{self.where()}"
            )
        partners = me - local + partner  # dispatch-wide ids
        source, found = grid.lanes_of(partners)
        live = found if m is None else found & m[source]
        if not live.all():
            j = int(np.flatnonzero(~live)[0])
            raise InterpError(
                f"{show(e)}: {grid.describe(int(me[j]))} reads invocation {int(partners[j])}, "
                f"which is not active here (WGSL leaves the value indeterminate){self.where()}"
            )
        if is_uniform(x):
            return x
        out = x.copy()
        out[lanes] = x[source]
        return out

    def subgroup(self, op: Op, args: tuple[np.ndarray, ...], m: Mask, e: ir.Expr) -> np.ndarray:
        """A subgroup builtin other than ``subgroupShuffleXor`` on the lanes of ``m`` (see
        *Subgroups* in :mod:`kvdsl.interp`): the active invocations of each subgroup laid out
        as a table of ``[subgroup, subgroup lane]``, reduced, scanned or read across."""
        grid, size = self.grid, self.grid.subgroup_size
        lanes = grid.active(m)
        if len(lanes) == 0:
            return args[0] if args else np.zeros(1, np.bool_)
        me = grid.original(lanes)
        local = me % grid.per_group
        runs = -(-grid.per_group // size)
        sub = me // grid.per_group * runs + local // size  # dispatch-wide subgroup index
        pos = local % size  # the subgroup_invocation_id
        groups, row = np.unique(sub, return_inverse=True)
        present = np.zeros((len(groups), size), np.bool_)
        present[row, pos] = True
        if op is Op.SUBGROUP_ELECT:
            first = np.argmax(present, axis=1)
            return self._sg_spread(pos == first[row], lanes)
        x = args[0]
        xs = broadcast(x, self.n)[lanes]
        if op in (Op.SUBGROUP_ALL, Op.SUBGROUP_ANY, Op.SUBGROUP_BALLOT):
            held = np.zeros((len(groups), size), np.bool_)
            held[row, pos] = xs
            if op is Op.SUBGROUP_ALL:
                return self._sg_spread((held | ~present).all(axis=1)[row], lanes)
            if op is Op.SUBGROUP_ANY:
                return self._sg_spread(held.any(axis=1)[row], lanes)
            bits = np.zeros((len(groups), 4), np.uint32)
            for p in range(min(size, 128)):
                bits[:, p // 32] |= held[:, p].astype(np.uint32) << np.uint32(p % 32)
            return self._sg_spread(bits[row], lanes)
        table = np.zeros((len(groups), size) + xs.shape[1:], xs.dtype)
        table[row, pos] = xs
        fold = _FOLDS.get(op)
        if fold is not None:
            # In lane order, one lane at a time: a float sum's rounding is the sequential one.
            acc = np.full((len(groups),) + xs.shape[1:], _identity(op, xs.dtype), xs.dtype)
            scan = _SCANS.get(op)
            steps = np.empty_like(table) if scan is not None else None
            with np.errstate(all="ignore"):
                for p in range(size):
                    live = present[:, p].reshape((-1,) + (1,) * (xs.ndim - 1))
                    if scan:
                        steps[:, p] = acc
                    acc = np.where(live, fold(acc, table[:, p]), acc).astype(xs.dtype)
                    if scan is False:
                        steps[:, p] = acc
            return self._sg_spread(acc[row] if scan is None else steps[row, pos], lanes)
        if op is Op.SUBGROUP_BROADCAST_FIRST:
            return self._sg_spread(table[row, np.argmax(present, axis=1)[row]], lanes)
        k = broadcast(args[1], self.n)[lanes].astype(np.int64)
        if op is Op.SUBGROUP_BROADCAST:
            src, what = k, "lane"
            if not is_uniform(args[1]):  # WGSL asks the lane be uniform: one per subgroup
                first = np.zeros(len(groups), np.int64)
                first[row] = k
                bad = np.flatnonzero(first[row] != k)
                if bad.size:
                    i = int(bad[0])
                    raise InterpError(
                        f"{show(e)}: the lane differs within a subgroup: "
                        f"{grid.describe(int(me[i]))} has {int(k[i])}, another of its subgroup "
                        f"{int(first[row[i]])}{self.where()}"
                    )
        elif op is Op.SUBGROUP_SHUFFLE:
            src, what = k, "lane"
        elif op is Op.SUBGROUP_SHUFFLE_UP:
            src, what = pos - k, "lane (its own less the delta)"
        else:
            src, what = pos + k, "lane (its own plus the delta)"
        ok = (src >= 0) & (src < size)
        if op is Op.SUBGROUP_SHUFFLE_UP or op is Op.SUBGROUP_SHUFFLE_DOWN:
            # Past the subgroup's edge WGSL leaves the value indeterminate (a reduction by
            # shuffles down reads it on lanes whose result is never used); kvdsl gives what
            # llvmpipe does: down wraps around the subgroup, up gives the invocation its own.
            src = np.where(ok, src, pos if op is Op.SUBGROUP_SHUFFLE_UP else src % size)
            ok = np.ones_like(ok)
        safe = np.where(ok, src, 0)
        ok &= present[row, safe]
        if not ok.all():
            i = int(np.flatnonzero(~ok)[0])
            raise InterpError(
                f"{show(e)}: {grid.describe(int(me[i]))} reads subgroup {what} {int(src[i])}, "
                f"which is not an active invocation of its subgroup of {size} (WGSL leaves the "
                f"value indeterminate){self.where()}"
            )
        return self._sg_spread(table[row, safe], lanes)

    def _sg_spread(self, values: np.ndarray, lanes: np.ndarray) -> np.ndarray:
        """A per-lane value holding ``values`` on ``lanes`` (others arbitrary)."""
        if len(lanes) == self.n:
            return np.ascontiguousarray(values)
        out = np.zeros((self.n,) + values.shape[1:], values.dtype)
        out[lanes] = values
        return out

    def logic(self, op: Op, a: ir.Expr, b: ir.Expr, m: Mask) -> np.ndarray:
        """Short-circuit ``&&`` / ``||``: ``b`` runs only on lanes where ``a`` does not decide."""
        x = self.eval(a, m)
        rest = m_and(m, x, self.n) if op == Op.LAND else m_andnot(m, x, self.n)
        if empty(rest):
            return x
        y = self.eval(b, rest)
        return (x & y) if op == Op.LAND else (x | y)

    def apply(self, op: Op, args: tuple[np.ndarray, ...]) -> np.ndarray:
        """The op table's numpy implementation, scalars widened against vectors."""
        if (op is Op.DIV or op is Op.MOD) and args[0].dtype == np.uint32 and args[1].size == 1:
            # u32 by a uniform power of two: exactly a shift or a mask, and much cheaper.
            d = int(args[1].reshape(-1)[0])
            if d and not d & (d - 1):
                a = args[0]
                if op is Op.DIV:
                    return a >> np.uint32(d.bit_length() - 1)
                return a & np.uint32(d - 1)
        if len(args) == 2:
            a, b = args
            fast = _INT_FAST.get(op)
            if (
                fast is not None
                and a.dtype == b.dtype
                and a.dtype.kind in "iu"
                and a.ndim == b.ndim
            ):
                # Integer arrays wrap modulo 2^32 in numpy as in WGSL, silently: no error state
                # or dtype work needed.
                return fast(a, b)
        nd = max(a.ndim for a in args)
        if nd == 3 and op is Op.MUL:
            return ops.TABLE[op].impl(*args)  # a matrix: its operands' shapes say which product
        if any(a.ndim != nd for a in args):
            args = tuple(a.reshape(a.shape + (1,) * (nd - a.ndim)) for a in args)
        return ops.TABLE[op].impl(*args)

    def construct(self, ty, parts: list):
        if not parts:
            return self.zero(ty)  # vec4<f32>(), array<u32, 8>(): WGSL's zero value
        if isinstance(ty, Array):
            return ArrayValue(parts)
        if isinstance(ty, Struct):  # a struct value: its members by name
            return {n: p for (n, _), p in zip(ty.fields, parts)}
        lanes = max(p.shape[0] for p in parts)
        if type(ty) is Mat:  # [lanes, columns, rows]: from C columns or C*R scalars
            flat = np.stack([broadcast(p, lanes).reshape(lanes, -1) for p in parts], axis=1)
            return flat.reshape(lanes, ty.c, ty.r).astype(ty.elem.dtype, copy=False)
        cols = [broadcast(p, lanes).reshape(lanes, -1) for p in parts]
        if len(cols) == 1 and cols[0].shape[1] == 1:
            cols = cols * ty.n  # the splat vecN<T>(x)
        return np.concatenate(cols, axis=1).astype(ty.elem.dtype, copy=False)

    def argument(self, a: ir.Expr, ty: object, m: Mask):
        """The value of helper argument ``a`` for a parameter of type ``ty``: a storage
        texture's memory for a texture or sampler parameter (``put(img, i)``), else ``a``'s
        value."""
        if isinstance(ty, HANDLES):
            return self.texture_of(a.name)
        return self.eval(a, m)

    def texture_of(self, name: str):
        """The memory of the storage texture ``name`` names: a helper's texture parameter, or
        the module's texture."""
        for scope in reversed(self.scopes[1:]):
            slot = scope.get(name)
            if slot is not None:
                return slot.value
        return self.textures[name]

    def call(self, fn: ir.Function, args: list, m: Mask):
        """Inline a helper: its body runs on the caller's lanes with a fresh scope and frame."""
        caller = (self.scopes, self.frame, self.current)
        self.scopes = [self.module, {p: Slot(a) for (p, _), a in zip(fn.params, args)}]
        self.frame = Frame(m)
        try:
            self.block(fn.body, m)
            return self.frame.result
        finally:
            self.scopes, self.frame, self.current = caller
