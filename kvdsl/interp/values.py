"""The interpreter's data: the invocation grid, storage buffers, masks and conversions.

A *value* is a numpy array whose first axis is the invocation axis: length ``N`` (one entry per
invocation of the dispatch) or length 1 (the same for every invocation, a *uniform* value, which
broadcasts). Scalars are 1-D ``[L]``, vectors 2-D ``[L, n]``. A fixed-size array value is a Python
list of element values (see :class:`ArrayValue`). Values are never mutated in place, so binding
one to a name never aliases.

A *mask* says which invocations execute a statement: ``None`` means all of them, otherwise a
bool array of length ``N``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kvdsl.ir.nodes import Binding
from kvdsl.ir.types import Scalar, Vec

Mask = np.ndarray | None
COMPONENTS = "xyzw"


class ArrayValue(list):
    """A fixed-size array value: one value per element, each ``[L]`` or ``[L, n]``."""


# ---- the invocation grid ----------------------------------------------------------------------


class Grid:
    """The invocations of a dispatch, in WebGPU's order: workgroups with x fastest, then the local
    invocation index (``lid.x`` fastest) inside each workgroup.

    The machine may drop invocations that have returned from the entry point (see
    :meth:`compact`): *lanes* then number the invocations still live, and ``ids`` maps each
    lane to its invocation's index in the full dispatch.
    """

    def __init__(self, workgroups: tuple[int, int, int], size: tuple[int, int, int]) -> None:
        self.workgroups = tuple(int(w) for w in workgroups)
        self.size = tuple(int(s) for s in size)
        self.per_group = self.size[0] * self.size[1] * self.size[2]
        self.n = self.per_group * self.workgroups[0] * self.workgroups[1] * self.workgroups[2]
        if self.n >= 2**31:
            raise ValueError(f"{self.n} invocations are more than the interpreter tracks")
        self.ids: np.ndarray | None = None
        self.offset = 0  # with ids None, lane k is invocation offset + k
        self._lanes: np.ndarray | None = None
        self._cols: dict[tuple[str, int], np.ndarray] = {}

    @property
    def lanes(self) -> np.ndarray:
        """``0 .. n-1``, made when first needed."""
        if self._lanes is None:
            self._lanes = np.arange(self.n, dtype=np.int64)
        return self._lanes

    def column(self, builtin: str, comp: int) -> np.ndarray:
        """Component ``comp`` of a compute builtin (``gid``, ``lid``, ``wid``, ``nwg``) as a u32
        value; uniform (length 1) where every invocation has the same component."""
        key = (builtin, comp)
        if key not in self._cols:
            col = self._full(builtin, comp)
            if col.shape[0] > 1:
                col = (
                    col[self.ids]
                    if self.ids is not None
                    else col[self.offset : self.offset + self.n]
                )
            self._cols[key] = col
        return self._cols[key]

    def _full(self, builtin: str, comp: int) -> np.ndarray:
        if builtin == "nwg":
            return np.array([self.workgroups[comp]], np.uint32)
        # Lane order is the row-major order of (wid.z, wid.y, wid.x, lid.z, lid.y, lid.x).
        shape = self.workgroups[::-1] + self.size[::-1]

        def along(axis: int, n: int) -> np.ndarray:
            return np.arange(n, dtype=np.uint32).reshape([n if k == axis else 1 for k in range(6)])

        wid, lid = along(2 - comp, self.workgroups[comp]), along(5 - comp, self.size[comp])
        part = {"wid": wid, "lid": lid, "gid": wid * np.uint32(self.size[comp]) + lid}[builtin]
        if part.size == 1:
            return part.reshape(1)
        return np.broadcast_to(part, shape).reshape(-1)

    def original(self, lanes):
        """The dispatch-wide invocation index of ``lanes``."""
        if self.ids is None:
            return lanes + self.offset if self.offset else lanes
        return self.ids if lanes is self._lanes else self.ids[lanes]

    def compact(self, keep: np.ndarray | slice) -> None:
        """Keep only ``keep`` (lanes in the current numbering: an index array or a slice)."""
        if isinstance(keep, slice) and self.ids is None:
            self.offset += keep.start
            self.n = keep.stop - keep.start
        else:
            ids = self.ids if self.ids is not None else self.offset + np.arange(self.n)
            self.ids = ids[keep]
            self.n = len(self.ids)
        self._lanes = None
        self._cols = {k: v if v.shape[0] == 1 else v[keep] for k, v in self._cols.items()}

    def describe(self, i: int) -> str:
        """``gid=(x, y, z)`` of invocation ``i`` (dispatch-wide), with its workgroup and local ids."""
        i = int(i)
        local, group = i % self.per_group, i // self.per_group
        (sx, sy, _), (wx, wy, _) = self.size, self.workgroups
        lid = (local % sx, local // sx % sy, local // (sx * sy))
        wid = (group % wx, group // wx % wy, group // (wx * wy))
        gid = tuple(w * s + x for w, s, x in zip(wid, self.size, lid))
        return f"invocation gid={gid} (workgroup {wid}, local {lid})"

    def active(self, m: Mask) -> np.ndarray:
        """The lanes of mask ``m``."""
        return self.lanes if m is None else np.flatnonzero(m)


# ---- masks ------------------------------------------------------------------------------------


def is_uniform(v: np.ndarray) -> bool:
    """Whether ``v`` holds one value for every invocation."""
    return v.shape[0] == 1


def m_and(m: Mask, c: np.ndarray, n: int) -> Mask:
    """Lanes of ``m`` where the bool value ``c`` holds."""
    if is_uniform(c) and n != 1:
        return m if c[0] else np.zeros(n, bool)
    return c if m is None else m & c


def m_andnot(m: Mask, c: np.ndarray, n: int) -> Mask:
    """Lanes of ``m`` where the bool value ``c`` does not hold."""
    if is_uniform(c) and n != 1:
        return np.zeros(n, bool) if c[0] else m
    return ~c if m is None else m & ~c


def m_or(a: Mask, b: Mask) -> Mask:
    if a is None or b is None:
        return None
    return a | b


def empty(m: Mask) -> bool:
    return m is not None and not m.any()


def normal(m: Mask) -> Mask:
    """``None`` for a mask holding every lane."""
    return None if m is not None and m.all() else m


def sel(m: Mask, new: np.ndarray, old: np.ndarray) -> np.ndarray:
    """``new`` on the lanes of ``m``, ``old`` elsewhere."""
    if m is None:
        return new
    mm = m.reshape(m.shape + (1,) * (max(new.ndim, old.ndim) - 1))
    return np.where(mm, new, old)


def broadcast(v: np.ndarray, n: int) -> np.ndarray:
    """``v`` with ``n`` lanes."""
    return v if v.shape[0] == n else np.broadcast_to(v, (n,) + v.shape[1:])


# ---- storage buffers --------------------------------------------------------------------------


@dataclass
class Storage:
    """A binding's contents during a dispatch, and which invocation wrote each element."""

    binding: Binding
    data: np.ndarray  # [length] or [length, n]
    flat: np.ndarray  # the bytes the caller gets back, as the caller's dtype and shape
    owner: np.ndarray | None = field(default=None)  # lane that wrote each element, -1: none

    @property
    def length(self) -> int:
        return self.data.shape[0]

    def owners(self) -> np.ndarray:
        if self.owner is None:
            self.owner = np.full(self.length, -1, np.int32)
        return self.owner


def storage(binding: Binding, given: np.ndarray) -> Storage:
    """View ``given`` as ``binding``'s runtime array (read_write bindings get a private copy).

    The bytes are reinterpreted as the element type when the dtypes differ but have one size, as
    the GPU would see them; WGSL's ``arrayLength`` rounds a partial trailing element down.
    """
    given = np.asarray(given)
    dt = binding.elem.scalar.dtype
    if given.dtype.itemsize != dt.itemsize:
        raise TypeError(
            f"buffer '{binding.name}' has dtype {given.dtype}, binding element is {binding.elem}"
        )
    out = np.array(given, copy=True) if binding.access == "read_write" else given
    flat = np.ascontiguousarray(out).reshape(-1).view(dt)
    if isinstance(binding.elem, Vec):
        # Given tightly packed, as the runtime takes them (it pads vec3 to 16 bytes itself).
        n = binding.elem.n
        data = flat[: flat.size // n * n].reshape(-1, n)
    else:
        data = flat
    return Storage(binding, data, out)


def params_values(fields, params: dict | None) -> dict[str, np.ndarray]:
    """Each params field as a uniform value of its declared type."""
    params = params or {}
    out = {}
    for name, ty in fields:
        if name not in params:
            raise KeyError(f"params field '{name}' has no value")
        v = np.asarray(params[name])
        dt = ty.scalar.dtype
        if dt.kind in "iu" and v.dtype.kind in "iu":
            v = (v.astype(np.int64) & 0xFFFFFFFF).astype(np.uint32).view(dt)
        else:
            v = v.astype(dt)
        out[name] = v.reshape((1, ty.n) if isinstance(ty, Vec) else (1,))
    return out


# ---- conversions ------------------------------------------------------------------------------

# Float → integer saturates: the float is clamped, in its own type, to the values that truncate
# into the target's range, then truncated. The bounds are the largest floats inside the range,
# which is what naga and Tint emit: i32(3e9f) == 2147483520 (2^31 - 128, the largest f32 below
# 2^31), u32(5e9f) == 4294967040; an f16 (at most 65504) converts exactly, its infinities become
# ±65504. WGSL leaves NaN → integer indeterminate; here it is 0.
_SATURATE = {
    ("f32", "i32"): (-(2.0**31), 2147483520.0),
    ("f32", "u32"): (0.0, 4294967040.0),
    ("f16", "i32"): (-65504.0, 65504.0),
    ("f16", "u32"): (0.0, 65504.0),
}


def convert(x: np.ndarray, ty: Scalar | Vec) -> np.ndarray:
    """WGSL's value conversion ``ty(x)`` (scalar or component-wise)."""
    dst = ty.scalar
    src_kind, dt = x.dtype.kind, dst.dtype
    if x.dtype == dt:
        return x
    if dst.name == "bool":
        return x != 0  # NaN is not zero: bool(NaN) is true
    if src_kind == "f" and dst.is_int:
        lo, hi = _SATURATE[("f16" if x.dtype == np.float16 else "f32", dst.name)]
        with np.errstate(invalid="ignore"):
            y = np.clip(np.where(np.isnan(x), x.dtype.type(0), x), lo, hi)
        return y.astype(dt)
    with np.errstate(over="ignore", invalid="ignore"):
        # int → int keeps the bits (wraps); int → float and f32 → f16 round to nearest even.
        return x.astype(dt)
