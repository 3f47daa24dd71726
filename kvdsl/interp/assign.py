"""Assignment, a mixin of :class:`kvdsl.interp.machine.Machine`: a value stored, on the lanes of
a mask, into a name, an element, member or lane of a var, an element of a binding or of
workgroup memory, or through a pointer; and WGSL's zero value of a type, a ``var``'s value
before its first assignment.
"""

from __future__ import annotations

import numpy as np

from kvdsl.interp.errors import InterpError
from kvdsl.interp.memory import Flat, Row
from kvdsl.interp.values import COMPONENTS, ArrayValue, Mask, broadcast, is_uniform, merge, sel
from kvdsl.ir import tree as ir
from kvdsl.ir.show import show
from kvdsl.ir.types import Array, Mat, Struct, Vec


class Assignment:
    """Stores into the targets of assignments. The machine holds the state it reads: ``n``,
    ``buffers``, ``shared``, the scopes, ``_through`` (the expressions read through a pointer),
    ``_structs`` and ``_last_load``; :meth:`eval`, :meth:`lookup`, the stores of
    :class:`~kvdsl.interp.memory.Memory` and :class:`~kvdsl.interp.structs.StructMemory`, and
    :meth:`where` for messages."""

    def zero(self, ty) -> np.ndarray | ArrayValue:
        """WGSL's zero value of ``ty``, uniform."""
        if isinstance(ty, Array):
            return ArrayValue([self.zero(ty.elem)] * ty.n)
        if isinstance(ty, Struct):  # a struct value: its members by name
            return {n: self.zero(t) for n, t in ty.fields}
        if isinstance(ty, Mat):  # [lanes, columns, rows]
            return np.zeros((1, ty.c, ty.r), ty.elem.dtype)
        shape = (1, ty.n) if isinstance(ty, Vec) else (1,)
        return np.zeros(shape, ty.scalar.dtype)

    def root(self, target: ir.Expr) -> ir.Name:
        while isinstance(target, (ir.Index, ir.Member)):
            target = target.base
        return target

    def assign(self, target: ir.Expr, v, m: Mask) -> None:
        """Store ``v`` into ``target`` on the lanes of ``m``."""
        if self._through and id(target) in self._through:  # through a pointer: where it points
            chain, hidden = self.locate(target, m)
            if type(chain) is ir.Name and chain.name in self.shared:  # a whole workgroup array
                w = self.shared[chain.name]
                if w.whole:  # one value: total, acc
                    self.struct_store(w, chain, v, m)
                else:
                    self.shared_put(w, None, v, m)
                return
            self.at(hidden, lambda: self.assign(chain, v, m))
            return
        if self._structs and (sb := self.struct_root(target)) is not None:
            self.struct_store(sb, target, v, m)
            return
        if (
            isinstance(target, (ir.Index, ir.Member))
            and isinstance(target.base, ir.Index)
            and isinstance(target.base.base, ir.Name)
        ):
            b = self.buffers.get(target.base.base.name)
            if b is not None and not self._shadowed(target.base.base.name):
                # ``out[i].x = v`` or ``out[i][j] = v``: one scalar of the element, whose
                # races are its own (WGSL's memory locations are scalars).
                idx = self.eval(target.base.index, m)
                if type(target) is ir.Member:
                    lane = np.array([COMPONENTS.index(target.name)], np.uint32)
                else:
                    lane = self.eval(target.index, m)
                self.store_component(b, idx, lane, v, m)
                return
        if isinstance(target, ir.Index) and isinstance(target.base, ir.Name):
            b = self.buffers.get(target.base.name)
            if b is not None and not self._shadowed(target.base.name):
                # ``dst[x] = src[x]``: the index the value's load just computed, not a copy.
                last = self._last_load
                if last is not None and last[1] is m and last[2] is self.scopes:
                    idx = last[3] if last[0] == target.index else self.eval(target.index, m)
                else:
                    idx = self.eval(target.index, m)
                self.store(b, idx, v, m)
                return
        ref = self.shared_ref(target) if self.shared else None
        if ref is not None:  # ``w[i] = v`` or ``w[i][lane] = v``
            w, index, lane = ref
            if type(index) is Row:  # a whole row of an array of arrays
                self.shared_put(w, self.row_start(w, index.row, m), v, m)
                return
            if type(index) is Flat:
                idx = self.flat_index(w, index, m)
            else:
                idx = self.eval(index, m)
            self.shared_store(w, idx, v, m, None if lane is None else self.eval(lane, m))
            return
        slot = self.lookup(self.root(target).name)
        # Lanes outside the var's declaring mask never see it, so when the statement runs on
        # exactly those lanes the new value can replace the old one outright: a loop counter
        # stays uniform (one value for all lanes) instead of being masked into N copies.
        eff = None if m is slot.decl else m
        slot.value = self.update(target, v, m, eff)

    def update(self, target: ir.Expr, v, m: Mask, eff: Mask):
        """The new value of the var under ``target`` once ``target`` holds ``v``."""
        match target:
            case ir.Name(name):
                old = self.lookup(name).value
                return v if eff is None else merge(eff, v, old)
            case ir.Index(base, index):
                container = self.eval(base, m)
                idx = self.eval(index, m)
                return self.update(base, self.set_elem(container, idx, v, m, eff, base), m, None)
            case ir.Member(base, name):
                container = self.eval(base, m)
                if type(container) is dict:  # a member of a struct value
                    new = dict(container)
                    new[name] = v if eff is None else merge(eff, v, container[name])
                    return self.update(base, new, m, None)
                if len(name) != 1:
                    raise InterpError(f"cannot assign to swizzle .{name}{self.where()}")
                idx = np.array([COMPONENTS.index(name)], np.uint32)
                return self.update(base, self.set_elem(container, idx, v, m, eff, base), m, None)
        raise InterpError(f"cannot assign to {show(target)}{self.where()}")

    def set_elem(self, container, idx: np.ndarray, v, m: Mask, eff: Mask, base: ir.Expr):
        """``container`` with element ``idx`` set to ``v`` on the lanes of ``eff``."""
        length = len(container) if isinstance(container, ArrayValue) else container.shape[1]
        self._oob(show(base), idx, length, m)
        if isinstance(container, ArrayValue):
            out = ArrayValue(container)
            if is_uniform(idx):
                i = int(idx[0])
                out[i] = sel(eff, v, out[i])
            else:
                live = eff if eff is not None else np.ones(self.n, bool)
                for i in range(length):
                    out[i] = sel(live & (idx == i), v, out[i])
            return out
        lanes = max(container.shape[0], v.shape[0], 1 if eff is None else self.n)
        out = np.array(broadcast(container, lanes))
        if is_uniform(idx):
            i = int(idx[0])
            out[:, i] = sel(eff, v, out[:, i]) if eff is not None else v
        else:
            live = eff if eff is not None else np.ones(self.n, bool)
            rows = np.flatnonzero(live)
            out = np.array(broadcast(out, self.n))
            out[rows, idx[rows]] = broadcast(v, self.n)[rows]
        return out
