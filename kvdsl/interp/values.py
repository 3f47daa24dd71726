"""The interpreter's data: the invocation grid, masks, storage buffers and workgroup arrays,
conversions, and the strided (affine) index sets that loads and stores take as buffer views.

A *value* is a numpy array whose first axis is the invocation axis: length ``N`` (one entry per
invocation of the dispatch) or length 1 (the same for every invocation, a *uniform* value, which
broadcasts). Scalars are 1-D ``[L]``, vectors 2-D ``[L, n]``. A fixed-size array value is a Python
list of element values (see :class:`ArrayValue`). Values are never mutated in place, so binding
one to a name never aliases.

A *mask* says which invocations execute a statement: ``None`` means all of them, otherwise a
bool array of length ``N``.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field

import numpy as np

from kvdsl.ir.tree import Binding, WorkgroupVar
from kvdsl.ir.types import (
    Array,
    Atomic,
    Mat,
    Scalar,
    Struct,
    Vec,
    held_as_words,
    memory_unit,
    stride,
    u32,
    workgroup_words,
)

Mask = np.ndarray | None
COMPONENTS = "xyzw"
u16 = np.dtype(np.uint16)  # one half of memory held as 16-bit halves (memory_unit 2)


class ArrayValue(list):
    """A fixed-size array value: one value per element, each ``[L]`` or ``[L, n]``."""


# ---- the invocation grid ----------------------------------------------------------------------


class Grid:
    """The invocations of a dispatch, in WebGPU's order: workgroups with x fastest, then the local
    invocation index (``lid.x`` fastest) inside each workgroup.

    A grid may cover only the run ``[start, stop)`` of the dispatch's invocations (a *chunk*, see
    :meth:`chunks`), and the machine may drop invocations that have returned from the entry point
    (see :meth:`compact`): *lanes* then number the invocations still live, and ``ids`` maps each
    lane to its invocation's index in the full dispatch.
    """

    def __init__(
        self,
        workgroups: tuple[int, int, int],
        size: tuple[int, int, int],
        start: int = 0,
        stop: int | None = None,
        subgroup_size: int = 32,
    ) -> None:
        self.subgroup_size = subgroup_size
        self.workgroups = tuple(int(w) for w in workgroups)
        self.size = tuple(int(s) for s in size)
        self.per_group = self.size[0] * self.size[1] * self.size[2]
        self.total = self.per_group * self.workgroups[0] * self.workgroups[1] * self.workgroups[2]
        if self.total >= 2**31:
            raise ValueError(f"{self.total} invocations are more than the interpreter tracks")
        stop = self.total if stop is None else stop
        self.n = stop - start
        self.ids: np.ndarray | None = None
        self.offset = start  # with ids None, lane k is invocation offset + k
        self._lanes: np.ndarray | None = None
        self._orig: np.ndarray | None = None  # original(lanes), made when first needed
        self._cols: dict[tuple[str, int], np.ndarray] = {}

    def chunks(self, target: int):
        """Runs ``(start, stop)`` of whole workgroups covering the dispatch, about ``target``
        invocations each, none crossing a row of ``X`` workgroups (so ``wid.y`` and ``wid.z``
        are the same for every invocation of a run)."""
        row = self.workgroups[0]
        step = max(1, min(row, target // self.per_group)) if row else 1
        for r in range(self.workgroups[1] * self.workgroups[2]):
            for x in range(0, row, step):
                g0, g1 = r * row + x, r * row + min(row, x + step)
                yield g0 * self.per_group, g1 * self.per_group

    @property
    def lanes(self) -> np.ndarray:
        """``0 .. n-1``, made when first needed."""
        if self._lanes is None:
            self._lanes = np.arange(self.n, dtype=np.int64)
        return self._lanes

    def column(self, builtin: str, comp: int) -> np.ndarray:
        """Component ``comp`` of a compute builtin (``gid``, ``lid``, ``wid``, ``nwg``; ``sg``,
        the subgroup size, has only component 0) as a u32 value; uniform (length 1) where every
        live invocation has the same component."""
        key = (builtin, comp)
        col = self._cols.get(key)
        if col is None:
            if builtin == "sg":
                col = np.array([self.subgroup_size], np.uint32)
            elif builtin == "sgid":  # subgroups are aligned runs of local indices
                local = self.original(self.lanes) % self.per_group
                col = (local % self.subgroup_size).astype(np.uint32)
            elif builtin == "nwg":
                col = np.array([self.workgroups[comp]], np.uint32)
            elif self.ids is None and self.offset % self.per_group == self.n % self.per_group == 0:
                col = self._whole_groups(builtin, comp)
            elif builtin == "gid":
                wid, lid = self.column("wid", comp), self.column("lid", comp)
                col = wid * np.uint32(self.size[comp]) + lid
            else:
                col = self._part(builtin, comp)
            self._cols[key] = col
        return col

    def _whole_groups(self, builtin: str, comp: int) -> np.ndarray:
        # A run of whole workgroups is a [groups, per_group] table: the workgroup part varies
        # along rows, the local part along columns, so the column is one broadcast add.
        p = self.per_group
        groups = Grid(self.workgroups, (1, 1, 1), self.offset // p, (self.offset + self.n) // p)
        wid = groups._part("wid", comp) if builtin != "lid" else np.zeros(1, np.uint32)
        if builtin == "wid":
            return wid if wid.shape[0] == 1 else np.repeat(wid, p)
        lid = Grid((1, 1, 1), self.size)._part("lid", comp)
        if builtin == "gid":
            wid = wid * np.uint32(self.size[comp])
        if wid.shape[0] == 1 and lid.shape[0] == 1:
            return wid + lid
        table = wid[:, None] + lid[None, :]
        return np.broadcast_to(table, (self.n // p, p)).reshape(-1)

    def _part(self, builtin: str, comp: int) -> np.ndarray:
        # Invocation k is local index k % per_group of workgroup k // per_group; each is split
        # into components x fastest: component c is (k // step) % count.
        dims = self.size if builtin == "lid" else self.workgroups
        step = math.prod(dims[:comp]) * (self.per_group if builtin == "wid" else 1)
        count = dims[comp]
        lo, hi = self.offset, self.offset + self.n - 1
        if self.ids is not None:
            lo, hi = int(self.ids[0]), int(self.ids[-1])  # ids ascend
        if count == 1 or lo // step == hi // step:
            return np.array([lo // step % count], np.uint32)
        k = (
            self.ids.astype(np.uint32)
            if self.ids is not None
            else np.arange(lo, hi + 1, dtype=np.uint32)
        )
        q = k // np.uint32(step)
        return q - q // np.uint32(count) * np.uint32(count)

    def original(self, lanes):
        """The dispatch-wide invocation index of ``lanes``."""
        if self.ids is None:
            if lanes is self._lanes and self.offset:
                if self._orig is None:
                    self._orig = lanes + self.offset
                return self._orig
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
        self._lanes = self._orig = None
        self._cols = {k: v if v.shape[0] == 1 else v[keep] for k, v in self._cols.items()}

    def writers(self, m) -> tuple | None:
        """The invocation ids of the lanes of ``m`` as ``(first, counts, steps)`` (see
        :meth:`Storage.defer`), where they are a pattern."""
        if m is not None or self.ids is not None:
            return None
        return (self.offset, (self.n,), (1,))

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

    def lanes_of(self, invocations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(lane, found) for dispatch-wide invocation indices: the lane holding each, and whether
        it is live in this grid (where not, its lane is 0)."""
        if self.ids is None:
            lane = invocations - self.offset
            found = (lane >= 0) & (lane < self.n)
        else:
            lane = np.searchsorted(self.ids, invocations)
            found = lane < self.n
            found[found] = self.ids[lane[found]] == invocations[found]
        return np.where(found, lane, 0), found


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
    """``new`` on the lanes of ``m``, ``old`` elsewhere (element by element for arrays)."""
    if m is None:
        return new
    if type(new) is ArrayValue:  # an array of arrays: each inner one
        return ArrayValue(sel(m, a, b) for a, b in zip(new, old))
    mm = m.reshape(m.shape + (1,) * (max(new.ndim, old.ndim) - 1))
    return np.where(mm, new, old)


def broadcast(v: np.ndarray, n: int) -> np.ndarray:
    """``v`` with ``n`` lanes."""
    return v if v.shape[0] == n else np.broadcast_to(v, (n,) + v.shape[1:])


# ---- storage buffers --------------------------------------------------------------------------


@dataclass
class Storage:
    """A binding's contents during a dispatch, and which invocations wrote and read each
    element."""

    binding: Binding
    data: np.ndarray  # [length] or [length, n]
    flat: np.ndarray  # the bytes the caller gets back, as the caller's dtype and shape
    owner: np.ndarray | None = field(default=None)  # lane that wrote each element, -1: none
    wstmt: np.ndarray | None = field(default=None)  # the statement (Sync's number) of each write
    # Per element, the clock of the first storageBarrier() its writer's workgroup passed after
    # the write (-1: none yet; None: no storageBarrier() yet), see kvdsl.interp.races.
    wfence: np.ndarray | None = field(default=None)
    # Per element: the latest reader, the clock of a barrier after its read and the statement
    # of the read, and the same of the latest reader other than it (-1: none; None: nothing
    # read yet), see kvdsl.interp.races.
    reads: np.ndarray | None = field(default=None)
    # Strided stores not yet entered in ``owner``: (index set, writers' pattern), over disjoint
    # spans (sorted), while nothing has needed ``owner`` itself.
    pending: list = field(default_factory=list)
    spans: list = field(default_factory=list)

    @property
    def length(self) -> int:
        return self.data.shape[0]

    @property
    def written(self) -> bool:
        """Whether anything in this dispatch wrote an element."""
        return self.owner is not None or bool(self.pending)

    def defer(self, shape: Shape, writers: tuple, stmt: int) -> bool:
        """Record a strided store by the invocations ``writers`` (``(first, counts, steps)``:
        ``first + sum(k_i * steps_i)`` over ``counts``, in lane order) without touching
        ``owner``, if ``owner`` was never needed and no earlier store's span meets its span
        (so no element can have two writers); False, recording nothing, otherwise."""
        if self.owner is not None:
            return False
        lo, dims = shape
        span = (lo, lo + sum((c - 1) * st for c, st in dims))
        at = bisect.bisect(self.spans, span)
        if at and self.spans[at - 1][1] >= span[0]:
            return False
        if at < len(self.spans) and self.spans[at][0] <= span[1]:
            return False
        self.spans.insert(at, span)
        self.pending.append((shape, writers, stmt))
        return True

    def wfence_at(self, i: np.ndarray) -> np.ndarray:
        """:attr:`wfence` of elements ``i`` (-1 where no barrier followed the write)."""
        if self.wfence is None:
            return np.full(len(i), -1, np.int32)
        return self.wfence[i]

    def owners(self) -> np.ndarray:
        """Per element the invocation that wrote it (-1: none), with :attr:`wstmt` beside it."""
        if self.owner is None:
            self.owner = np.full(self.length, -1, np.int32)
            self.wstmt = np.full(self.length, -1, np.int32)
            for shape, (first, cnt, steps), stmt in self.pending:
                ids = np.full(1, first, np.int64)
                for c, st in zip(cnt, steps):
                    ids = (ids[:, None] + np.arange(c, dtype=np.int64) * st).reshape(-1)
                strided(self.owner, shape)[...] = ids.reshape(counts(shape))
                strided(self.wstmt, shape)[...] = stmt
            self.pending.clear()
            self.spans.clear()
        return self.owner


class SharedArray:
    """A ``var<workgroup>`` array during one chunk: one row per workgroup of the chunk, and per
    *slot* (a scalar element, or one lane of a vector element) the invocation that wrote it and
    the one that read it since the last barrier (-1: none, -2 for readers: several), and whether
    anything wrote it this dispatch. Slots, not elements, so that invocations writing different
    lanes of one vector (``w[i][lane] = x``) do not race, as in WGSL."""

    def __init__(self, var: WorkgroupVar, groups: int, first: int) -> None:
        self.var = var
        scalar = isinstance(var.ty, Atomic)  # a var<workgroup> atomic: an array of one
        elem = var.ty if scalar else var.ty.elem
        # An array of structs, or of arrays of structs, is held as u32 words in WGSL's layout
        # (kvdsl.interp.structs), 16-bit halves where it holds an f16 (memory_unit): ``words``
        # per outer element.
        self.unit = memory_unit(elem)
        self.words = stride(elem) // self.unit if workgroup_words(var.ty) else None
        # An array of arrays is held flat, row by row: element [r][c] is r * inner + c.
        self.inner = elem.n if isinstance(elem, Array) and self.words is None else None
        if self.inner is not None:
            elem = elem.elem
        self.length = 1 if scalar else var.ty.n * (self.inner or 1)
        if self.words is not None:
            elem, self.length = (u32 if self.unit == 4 else u16), var.ty.n * self.words
        self.first = first  # dispatch-wide index of the chunk's first workgroup
        self.lanes = elem.n if isinstance(elem, Vec) else 1
        shape = (groups * self.length,) + ((elem.n,) if isinstance(elem, Vec) else ())
        self.data = np.zeros(shape, elem if elem is u16 else elem.scalar.dtype)
        slots = groups * self.length * self.lanes
        self.owner = np.full(slots, -1, np.int64)
        self.reader = np.full(slots, -1, np.int64)
        self.written = np.zeros(slots, bool)

    def barrier(self) -> None:
        """Forget who wrote and read what: accesses on either side of a barrier never race."""
        self.owner.fill(-1)
        self.reader.fill(-1)

    def show(self, slot: int) -> str:
        """The element (and lane, for a vector array) of ``slot``, as WGSL indexes it."""
        lane = f"[{slot % self.lanes}]" if self.lanes > 1 else ""
        e = slot // self.lanes % self.length
        if self.words is not None and isinstance(self.var.ty.elem, (Array, Mat)):
            return f"{self.var.name}[{e // self.words}]" + word_path(
                self.var.ty.elem, e % self.words, self.unit
            )
        if self.words is not None:
            unit = unit_name(self.unit)
            return f"{self.var.name}[{e // self.words}] ({unit} {e % self.words} of the struct)"
        if self.inner is not None:
            return f"{self.var.name}[{e // self.inner}][{e % self.inner}]{lane}"
        return f"{self.var.name}[{e}]{lane}"


def storage(binding: Binding, given: np.ndarray) -> Storage:
    """View ``given`` as ``binding``'s runtime array (read_write bindings get a private copy).

    The bytes are reinterpreted as the element type when the dtypes differ but have one size (or
    the array holds the binding's host ``data`` type), as the GPU would see them; WGSL's
    ``arrayLength`` rounds a partial trailing element down.
    """
    given = np.asarray(given)
    # An array of structs, or of arrays, is held as u32 words (kvdsl.interp.structs), 16-bit
    # halves where it holds an f16 (memory_unit).
    dt = binding.elem.scalar.dtype if not held_as_words(binding.elem) else u32.dtype
    if held_as_words(binding.elem) and memory_unit(binding.elem) == 2:
        dt = u16
    # The host's array holds binding.host values (f16 data of u32 words: a float16 array).
    if given.dtype.itemsize != binding.host.dtype.itemsize:
        raise TypeError(
            f"buffer '{binding.name}' has dtype {given.dtype}, binding element is {binding.elem}"
        )
    out = np.array(given, copy=True) if binding.access == "read_write" else given
    flat = np.ascontiguousarray(out).reshape(-1)
    per = binding.host_values  # whole elements only, like arrayLength
    flat = flat[: flat.size // per * per].view(dt)
    # Vectors given tightly packed, as the runtime takes them (it pads vec3 to 16 bytes itself).
    # A binding that is one vector is held as its scalars (kvdsl.interp.structs.by_words).
    vectors = isinstance(binding.elem, Vec) and not binding.whole
    data = flat.reshape(-1, binding.elem.n) if vectors else flat
    return Storage(binding, data, out)


def params_values(fields, params: dict | None) -> dict[str, np.ndarray]:
    """Each params field as a uniform value of its declared type."""
    params = params or {}
    out = {}
    for name, ty in fields:
        if name not in params:
            raise KeyError(f"params field '{name}' has no value")
        out[name] = _uniform_value(ty, params[name])
    return out


def _uniform_value(ty, value):
    """``value`` as a uniform value of type ``ty``: a struct as its members by name, a
    fixed-size array as an :class:`ArrayValue` of its elements, as function-scope values are."""
    if isinstance(ty, Struct):
        return {n: _uniform_value(t, value[n]) for n, t in ty.fields}
    if isinstance(ty, Array):
        return ArrayValue(_uniform_value(ty.elem, x) for x in value)
    v = np.asarray(value)
    dt = ty.scalar.dtype
    if dt.kind in "iu" and v.dtype.kind in "iu":
        v = (v.astype(np.int64) & 0xFFFFFFFF).astype(np.uint32).view(dt)
    else:
        v = v.astype(dt)
    if isinstance(ty, Mat):  # column-major: [1, columns, rows]
        return v.reshape(1, ty.c, ty.r)
    return v.reshape((1, ty.n) if isinstance(ty, Vec) else (1,))


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


# ---- affine index sets ------------------------------------------------------------------------

_PREFIX = 4096  # the first window searched for the end of an index array's first run
_RAMP = np.arange(_PREFIX, dtype=np.int64)
_LEVELS = 6  # deepest nesting of runs looked for

Shape = tuple[int, tuple[tuple[int, int], ...]]  # (lo, ((count, step), ...) outermost first)


def affine(i: np.ndarray, length: int) -> Shape | None:
    """``(lo, ((c0, s0), (c1, s1), ...))`` when the 1-D index array ``i`` is, in order,
    ``lo + s0*k0 + s1*k1 + ...`` for ``k0 < c0``, ``k1 < c1``, ... (the last level fastest), with
    every step positive, the indices provably distinct (each step larger than the span of the
    levels with smaller steps) and inside ``[0, length)``; else None.

    Such an index set is a strided view of the buffer: a load or store through it is a slice
    copy, not a gather or scatter. Most kernels' accesses are this shape (a contiguous run, one
    row per invocation, a run per workgroup, and in a batched loop the trips as one more level);
    the check costs a couple of passes over ``i``.
    """
    n = i.shape[0]
    if n < 2 or i.ndim != 1:
        return None
    lo = int(i[0])
    if lo < 0:
        return None
    step = int(i[1]) - lo
    if int(i[-1]) == lo + step * (n - 1) and step > 0 and lo + step * (n - 1) < length:
        # Most often one run: one pass to confirm it.
        if bool(((i - _ramp(i.dtype, n, step)) == i.dtype.type(lo)).all()):
            return (lo, ((n, step),))
    dims = _levels(i, lo, _LEVELS)
    if dims is None:
        return None
    span = 0
    for count, step in sorted(dims, key=lambda d: d[1]):
        if step <= span:
            return None  # levels could overlap (or run backwards)
        span += (count - 1) * step
    if lo + span >= min(length, 2**31):
        return None
    cols, step = dims[-1]
    across = _ramp(i.dtype, cols, step)
    if len(dims) == 1:
        return (lo, dims) if bool(((i - across) == i.dtype.type(lo)).all()) else None
    rows = n // cols
    grid = i.reshape(rows, cols)
    down = _start_of_rows(lo, dims[:-1]).astype(i.dtype)
    # A few rows' ends first, so that an index set that is not affine is rejected cheaply.
    k = min(rows, 16)
    probe = np.arange(k) * (rows - 1) // max(k - 1, 1)
    if not (
        (grid[probe, 0] == down[probe]).all()
        and (grid[probe, -1] == down[probe] + i.dtype.type(step * (cols - 1))).all()
    ):
        return None
    ok = bool(((grid - across) == down[:, None]).all())
    return (lo, dims) if ok else None


def _levels(i: np.ndarray, lo: int, depth: int) -> tuple[tuple[int, int], ...] | None:
    """The nested runs ``i`` would be made of if it is affine (not yet verified past the first
    run of each level)."""
    n = i.shape[0]
    step = int(i[1]) - lo
    if step <= 0 or depth == 0:
        return None
    pos, window, cols = 0, _PREFIX, n
    while pos < n:
        seg = i[pos : pos + window]
        ramp = _RAMP[: seg.shape[0]] if window == _PREFIX else np.arange(seg.shape[0])
        brk = np.flatnonzero(seg != lo + step * (pos + ramp))
        if brk.size:
            cols = pos + int(brk[0])
            break
        pos += seg.shape[0]
        window *= 4
    if cols == n:
        return ((n, step),)
    if n % cols:
        return None
    outer = _levels(i[::cols], lo, depth - 1)
    return None if outer is None else outer + ((cols, step),)


def _start_of_rows(lo: int, dims: tuple[tuple[int, int], ...]) -> np.ndarray:
    """``lo + s0*k0 + ...`` over the outer levels, flattened (int64)."""
    out = np.array([lo], np.int64)
    for count, step in dims:
        out = (out[:, None] + np.arange(count, dtype=np.int64) * step).reshape(-1)
    return out


_RAMPS: dict[tuple, np.ndarray] = {}


def _ramp(dtype: np.dtype, n: int, step: int) -> np.ndarray:
    """``step * arange(n)``, remembered: loops ask for the same few again and again."""
    key = (dtype, n, step)
    r = _RAMPS.get(key)
    if r is None:
        if len(_RAMPS) > 64:
            _RAMPS.clear()
        r = _RAMPS[key] = np.arange(n, dtype=dtype) * dtype.type(step)
    return r


def counts(shape: Shape) -> tuple[int, ...]:
    """The extent of each level of an affine index set: the lanes' values reshaped to it."""
    return tuple(c for c, _ in shape[1])


def strided(data: np.ndarray, shape: Shape) -> np.ndarray:
    """The ``[c0, c1, ..., ...]`` view of ``data`` at the index set :func:`affine` found."""
    lo, dims = shape
    s0 = data.strides[0]
    return np.lib.stride_tricks.as_strided(
        data[lo:],
        tuple(c for c, _ in dims) + data.shape[1:],
        tuple(st * s0 for _, st in dims) + data.strides[1:],
    )


def word_path(ty: Array | Mat, word: int, unit: int = 4) -> str:
    """The indices of word ``word`` (of ``unit`` bytes: 4, or 2 for an f16-holding type's
    halves) of a nested array or a matrix in WGSL's layout, as WGSL writes them: ``[1].y`` of
    ``array<vec4<f32>, 2>``'s word 5, ``[2].x`` of a ``mat3x3<f32>``'s word 8; where the leaf
    is a struct, its word (half)."""
    out = ""
    while isinstance(ty, (Array, Mat)):
        step = stride(ty.elem) // unit if isinstance(ty, Array) else ty.column.align // unit
        out += f"[{word // step}]"
        word, ty = word % step, ty.elem if isinstance(ty, Array) else ty.column
    if isinstance(ty, Vec):
        return out + "." + "xyzw"[word * unit // ty.elem.size]
    if isinstance(ty, Struct):
        return out + f" ({unit_name(unit)} {word} of the struct)"
    return out


def unit_name(unit: int) -> str:
    """What a race message calls one unit of memory held as words: ``word``, or ``half`` (16
    bits, in memory holding an f16: :func:`kvdsl.ir.types.memory_unit`)."""
    return "word" if unit == 4 else "half"
