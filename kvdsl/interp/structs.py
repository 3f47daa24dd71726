"""Arrays of structs in storage and workgroup memory: ``blocks[i].qs[j]``, ``blocks[i].d``,
``tile[i].v.y``.

A binding or workgroup array whose element is a struct (or a matrix, or an array of them) is held
as ``u32`` words (16-bit halves where it holds an ``f16``: :func:`kvdsl.ir.types.memory_unit`,
so two invocations writing the two f16 halves of one word do not race, as in WGSL, and a 32-bit
member is two halves) in WGSL's host layout (member
offsets rounded up to each member's alignment, the array stride the struct's size rounded up
to its alignment: :func:`kvdsl.ir.types.field_offsets`, :func:`~kvdsl.ir.types.stride`), the
bytes the host gives and gets back. An access chain ending at a scalar or a vector becomes the
word offset of its first component, each level's index checked against its own length (the
struct's element count, a member array's size, a vector's width); loads and stores go through
:class:`kvdsl.interp.memory.Memory` word by word, so bounds, races and uninitialised reads are
found per word (in workgroup memory the word is a slot of the
:class:`~kvdsl.interp.buffers.SharedArray`). A storage binding of nested arrays
(``array<array<f32, 4>>``, ``array<array<u32, 8>, 16>``, ``array<array<B, 2>>``) is held and
reached the same way: each outer element a block of words. A mixin of
:class:`kvdsl.interp.machine.Machine`.
"""

from __future__ import annotations

import numpy as np

from kvdsl.interp.errors import InterpError
from kvdsl.interp.buffers import SharedArray, Storage
from kvdsl.interp.values import COMPONENTS, ArrayValue, Mask, broadcast
from kvdsl.ir import tree as ir
from kvdsl.ir.show import show
from kvdsl.ir.types import (
    Array,
    Mat,
    RuntimeArray,
    Scalar,
    Struct,
    Vec,
    field_offsets,
    held_as_words,
    stride,
)


def by_words(b: ir.Binding) -> bool:
    """Whether binding ``b`` is reached by word offsets: an array of structs or arrays (held as
    ``u32`` words), or a binding that is one struct, array, scalar or vector (a scalar or vector
    held as its scalars, each component one "word")."""
    return held_as_words(b.elem) or (b.whole and isinstance(b.elem, (Scalar, Vec)))


class StructMemory:
    """Word-offset loads and stores of struct members in storage and workgroup memory."""

    def struct_root(self, e: ir.Expr) -> Storage | SharedArray | None:
        """The struct-holding binding or workgroup array an access chain ``e`` starts from,
        else None."""
        x = e
        while type(x) is ir.Index or type(x) is ir.Member:
            x = x.base
        if type(x) is not ir.Name or self._shadowed(x.name):
            return None
        b = self.buffers.get(x.name)
        if b is not None:
            return b if by_words(b.binding) and (x is not e or b.binding.whole) else None
        w = self.shared.get(x.name)
        if w is None or (x is e and not w.whole):
            return None
        return w if w.words is not None else None

    def struct_words(self, b: Storage, e: ir.Expr, m: Mask):
        """``(first word per lane, type, swizzle)`` of chain ``e`` into ``b``: the word index of
        the scalar, vector or array it names, its type, and the components of a trailing
        swizzle of more than one (else None)."""
        path = []
        x = e
        while type(x) is ir.Index or type(x) is ir.Member:
            path.append(x)
            x = x.base
        path.reverse()
        shared = type(b) is SharedArray
        st = (b.var.ty if b.whole else b.var.ty.elem) if shared else b.binding.elem
        unit = b.data.dtype.itemsize  # 4: u32 words; 2: f16 halves (memory_unit)
        if b.whole if shared else b.binding.whole:  # one value: its members from word 0
            word, ty, start = np.zeros(1, np.int64), st, 0
        else:
            first = path[0]
            if type(first) is not ir.Index:
                what = "structs" if isinstance(st, Struct) else "arrays"
                raise InterpError(f"{show(e)}: an array of {what} is indexed first{self.where()}")
            idx = self.eval(first.index, m)
            per = stride(st) // unit
            if shared:
                self._oob(b.var.name, idx, b.var.ty.n, m)
            else:
                self._oob(b.binding.name, idx, b.length // per, m)
            word, ty, start = idx.astype(np.int64) * per, st, 1
        for k, node in enumerate(path[start:], start):
            if type(node) is ir.Member and isinstance(ty, Struct):
                names = [n for n, _ in ty.fields]
                at = names.index(node.name)
                word = word + field_offsets(ty)[at] // unit
                ty = ty.fields[at][1]
            elif type(node) is ir.Member and isinstance(ty, Vec):
                if len(node.name) > 1:
                    if k != len(path) - 1:
                        raise InterpError(f"{show(e)}: a swizzle ends the chain{self.where()}")
                    return word, ty, [COMPONENTS.index(c) for c in node.name]
                word = word + COMPONENTS.index(node.name) * _units(ty.elem, unit)
                ty = ty.elem
            elif type(node) is ir.Index and isinstance(ty, RuntimeArray):
                # the runtime-sized last member: as many elements as the buffer's words hold
                j = self.eval(node.index, m)
                step = stride(ty.elem) // unit
                self._oob(show(node.base), j, (b.length - int(word[0])) // step, m)
                word = word + j.astype(np.int64) * step
                ty = ty.elem
            elif type(node) is ir.Index and type(ty) is Mat:  # a column, align(vecR) apart
                j = self.eval(node.index, m)
                self._oob(show(node.base), j, ty.c, m)
                word = word + j.astype(np.int64) * (ty.column.align // unit)
                ty = ty.column
            elif type(node) is ir.Index and isinstance(ty, (Array, Vec)):
                j = self.eval(node.index, m)
                self._oob(show(node.base), j, ty.n, m)
                step = stride(ty.elem) if isinstance(ty, Array) else ty.elem.size
                word = word + j.astype(np.int64) * (step // unit)
                ty = ty.elem
            else:
                raise InterpError(f"{show(e)}: {ty} has no such element{self.where()}")
        return word, ty, None

    def runtime_length(self, b: Storage, member: str) -> int:
        """``arrayLength(&b.member)``: the elements of the runtime-sized last member the
        buffer holds past its offset."""
        st, unit = b.binding.elem, b.data.dtype.itemsize
        at = field_offsets(st)[-1] // unit
        return max(b.length - at, 0) // (stride(st.fields[-1][1].elem) // unit)

    def struct_load(self, b: Storage, e: ir.Expr, m: Mask):
        """The value of chain ``e`` (a scalar, a vector, or a member array) on the lanes of
        ``m``."""
        word, ty, swizzle = self.struct_words(b, e, m)
        v = self._words_value(b, word, ty, m)
        if swizzle is not None:
            return v[:, swizzle]
        return v

    def _words_value(self, b: Storage, word: np.ndarray, ty, m: Mask):
        unit = b.data.dtype.itemsize
        if isinstance(ty, Scalar):
            if ty.size > unit:  # a 32-bit scalar in f16-holding memory: two halves
                lo, hi = self._unit_load(b, word, m), self._unit_load(b, word + 1, m)
                lanes = max(lo.shape[0], hi.shape[0])
                pair = np.stack([broadcast(lo, lanes), broadcast(hi, lanes)], axis=1)
                return np.ascontiguousarray(pair).view(np.uint32).reshape(-1).view(ty.dtype)
            got = self._unit_load(b, word, m)
            if ty.name == "bool":  # a word of workgroup memory holding a bool: 0 or 1
                return got != 0
            return np.ascontiguousarray(got).view(ty.dtype)
        if isinstance(ty, Vec):
            k = _units(ty.elem, unit)
            parts = [self._words_value(b, word + c * k, ty.elem, m) for c in range(ty.n)]
            lanes = max(p.shape[0] for p in parts)
            return np.stack([broadcast(p, lanes) for p in parts], axis=1)
        if isinstance(ty, Array):
            step = stride(ty.elem) // unit
            return ArrayValue(
                self._words_value(b, word + k * step, ty.elem, m) for k in range(ty.n)
            )
        if isinstance(ty, Mat):  # [lanes, columns, rows]
            step = ty.column.align // unit
            cols = [self._words_value(b, word + k * step, ty.column, m) for k in range(ty.c)]
            lanes = max(c.shape[0] for c in cols)
            return np.stack([broadcast(c, lanes) for c in cols], axis=1)
        if isinstance(ty, Struct):  # a whole struct: its members by name
            at = field_offsets(ty)
            return {
                n: self._words_value(b, word + at[k] // unit, t, m)
                for k, (n, t) in enumerate(ty.fields)
            }
        raise InterpError(f"a whole {ty} value read from memory{self.where()}")

    def _unit_load(self, b: Storage, word: np.ndarray, m: Mask) -> np.ndarray:
        """The units (words or halves) at ``word`` on the lanes of ``m``, as held."""
        if type(b) is SharedArray:
            return self.shared_load(b, word, m, None)
        return self.load(b, word, m)

    def _unit_store(self, b: Storage, word: np.ndarray, units: np.ndarray, m: Mask) -> None:
        """``units`` (words or halves, as held) stored at ``word`` on the lanes of ``m``."""
        if type(b) is SharedArray:
            self.shared_store(b, word, units, m, None)
        else:
            self.store(b, word, units, m)

    def struct_store(self, b: Storage, target: ir.Expr, v, m: Mask) -> None:
        """``target = v`` for chain ``target`` into ``b`` on the lanes of ``m``."""
        word, ty, swizzle = self.struct_words(b, target, m)
        if swizzle is not None:
            raise InterpError(f"cannot assign to swizzle {show(target)}{self.where()}")
        self._words_put(b, word, ty, v, m)

    def _words_put(self, b: Storage, word: np.ndarray, ty, v, m: Mask) -> None:
        unit = b.data.dtype.itemsize
        if isinstance(ty, Scalar):
            if ty.name == "bool":
                v = np.asarray(v).astype(b.data.dtype)
            words = np.ascontiguousarray(v).view(b.data.dtype)  # words, halves or the scalars
            if ty.size > unit:  # a 32-bit scalar in f16-holding memory: two halves
                halves = words.reshape(-1, 2)
                for k in range(2):
                    self._unit_store(b, word + k, np.ascontiguousarray(halves[:, k]), m)
            else:
                self._unit_store(b, word, words, m)
        elif isinstance(ty, Vec):
            k = _units(ty.elem, unit)
            for c in range(ty.n):
                self._words_put(b, word + c * k, ty.elem, np.ascontiguousarray(v[:, c]), m)
        elif isinstance(ty, Array):
            step = stride(ty.elem) // unit
            for k in range(ty.n):
                self._words_put(b, word + k * step, ty.elem, v[k], m)
        elif isinstance(ty, Mat):  # column by column, the padding after each left as it was
            step = ty.column.align // unit
            for k in range(ty.c):
                self._words_put(b, word + k * step, ty.column, np.ascontiguousarray(v[:, k]), m)
        elif isinstance(ty, Struct) and type(v) is dict:  # a whole struct, member by member
            at = field_offsets(ty)
            for k, (n, t) in enumerate(ty.fields):
                self._words_put(b, word + at[k] // unit, t, v[n], m)
        else:
            raise InterpError(f"a whole {ty} value stored to memory{self.where()}")


def _units(elem: Scalar, unit: int) -> int:
    """How many units of memory (words, or halves: ``unit`` bytes) one scalar ``elem`` takes;
    a whole binding of scalars or vectors is held as its scalars, one unit each."""
    return max(elem.size // unit, 1)
