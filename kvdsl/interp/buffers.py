"""The interpreter's memory: storage buffers (:class:`Storage`), workgroup arrays
(:class:`SharedArray`) and storage textures (:class:`TextureMemory`) with the records of who wrote and read each element, a host array taken
as a binding's contents, params as uniform values, and the names of the words of memory held in
WGSL's layout, for messages.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field, replace

import numpy as np

from kvdsl.interp.indexsets import Shape, counts, strided
from kvdsl.interp.values import ArrayValue
from kvdsl.ir.tree import Binding, Texture, WorkgroupVar
from kvdsl.ir.texels import host_axes, host_shape_fits, texel_refusal
from kvdsl.ir.types import (
    Array,
    Atomic,
    SCALARS,
    TEXEL_FORMATS,
    Mat,
    Sampler,
    Struct,
    Vec,
    held_as_words,
    memory_unit,
    stride,
    u32,
    workgroup_words,
)

u16 = np.dtype(np.uint16)  # one half of memory held as 16-bit halves (memory_unit 2)


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
    # A binding of vector elements once an access named one component (``out[i].y = v``): the
    # records per scalar, which every access of the binding keeps from then on (WGSL's memory
    # locations are scalars: invocations writing different components of one element do not
    # race). Its data is a view of :attr:`data`, component ``k`` of element ``i`` at
    # ``i * n + k``.
    split: Storage | None = field(default=None)

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

    def components(self) -> Storage:
        """:attr:`split`, made on first use from the records per element, each element's
        writer, its barrier and its readers entered for each of its components."""
        if self.split is None:
            n = self.binding.elem.n
            part = Storage(
                replace(self.binding, elem=self.binding.elem.scalar),
                self.data.reshape(-1),
                self.flat,
            )
            if self.written:
                owner = self.owners()
                part.owner, part.wstmt = np.repeat(owner, n), np.repeat(self.wstmt, n)
            if self.wfence is not None:
                part.wfence = np.repeat(self.wfence, n)
            if self.reads is not None:
                part.reads = np.repeat(self.reads, n, axis=1)
            self.split = part
        return self.split

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
        # One scalar, vector, matrix or struct (``var<workgroup> total: f32;``): one element of
        # words, reached from word 0 as a storage binding that is one value is.
        self.whole = not scalar and not isinstance(var.ty, Array)
        elem = var.ty if scalar or self.whole else var.ty.elem
        # An array of structs, or of arrays of structs, is held as u32 words in WGSL's layout
        # (kvdsl.interp.structs), 16-bit halves where it holds an f16 (memory_unit): ``words``
        # per outer element.
        self.unit = memory_unit(elem)
        self.words = stride(elem) // self.unit if workgroup_words(var.ty) else None
        # An array of arrays is held flat, row by row: element [r][c] is r * inner + c.
        self.inner = elem.n if isinstance(elem, Array) and self.words is None else None
        if self.inner is not None:
            elem = elem.elem
        self.length = 1 if scalar or self.whole else var.ty.n * (self.inner or 1)
        if self.words is not None:
            elem, self.length = (u32 if self.unit == 4 else u16), self.length * self.words
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
        if self.whole:  # total, acc.y, m[1].x, s (word 2 of the struct)
            return self.var.name + word_path(self.var.ty, e, self.unit)
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


def uniform_values(uniforms, params: dict | None) -> dict[str, object]:
    """Each uniform other than params (:class:`~kvdsl.ir.tree.Uniform`) as a value of its
    type, given in ``params`` by the uniform's name."""
    params = params or {}
    out = {}
    for u in uniforms:
        if u.name not in params:
            raise KeyError(f"uniform '{u.name}' has no value")
        out[u.name] = _uniform_value(u.ty, params[u.name])
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


@dataclass
class TextureMemory:
    """A texture during a dispatch: its texels as the host holds them (``[height, width,
    channels]`` of the format's dtype, ``[depth, height, width, 4]`` for a ``texture_3d``), and
    the invocation that wrote each texel (-1: none), for the race check (two invocations writing
    one texel of a storage texture in a dispatch race)."""

    texture: Texture
    data: np.ndarray
    owner: np.ndarray
    # Per texel of a read_write storage texture, the invocation that read it (-1: none, -2:
    # several), for the race of a read and another invocation's write, and their workgroup
    # (-1: none, -2: several).
    reader: np.ndarray | None = None
    rgroup: np.ndarray | None = None
    # Per texel, whether a textureBarrier() of its writer's (its readers') workgroup followed
    # the write (the reads): invocations of that workgroup may then overwrite or read it.
    ofenced: np.ndarray | None = None
    rfenced: np.ndarray | None = None


def texture_memory(texture: Texture, given: np.ndarray) -> TextureMemory:
    """``given`` (``[height, width, channels]`` of the format's dtype, ``[depth, height, width,
    4]`` for a ``texture_3d``) as ``texture``'s texels, a private copy."""
    ty = texture.ty
    if isinstance(ty, Sampler):  # WebGPU's default sampler: nothing held
        return TextureMemory(texture, np.zeros((0, 0, 0)), np.zeros((0, 0), np.int64))
    given = np.asarray(given)
    axes = host_axes(ty)
    shape_ok = host_shape_fits(ty, given.shape)
    if not shape_ok or given.dtype != ty.dtype:
        raise TypeError(
            f"texture '{texture.name}' ({ty}) is given as {given.dtype}{list(given.shape)}: "
            f"expected {ty.dtype}[{', '.join(axes)}]"
        )
    if (why := texel_refusal(texture.name, ty, given)) is not None:
        raise TypeError(why)
    if getattr(ty, "depth", False):
        given = given[..., None]  # held as one channel, as the other textures hold four
    data = np.array(given, copy=True)
    owner = np.full(data.shape[:-1], -1, np.int64)
    out = TextureMemory(texture, data, owner, ofenced=np.zeros(owner.shape, bool))
    if getattr(ty, "access", None) == "read_write":
        out.reader, out.rgroup = owner.copy(), owner.copy()
        out.rfenced = np.zeros(owner.shape, bool)
    return out


def from_texels(ty, texels: np.ndarray) -> np.ndarray:
    """Texels of storage texture format ``ty`` (``[lanes, channels]``) as ``textureLoad``
    gives them: a ``vec4`` of the format's channel type (``rgba8unorm``: ``x / 255``;
    ``rgba8snorm``: ``max(x / 127, -1)``; a format of fewer channels: ``(x, [y,] 0, [0,] 1)``)."""
    dtype = SCALARS[TEXEL_FORMATS[ty.format][0]].dtype
    if ty.format == "rgba8unorm":
        return (texels.astype(np.float32) / np.float32(255)).astype(dtype)
    if ty.format == "rgba8snorm":
        return np.maximum(texels.astype(np.float32) / np.float32(127), np.float32(-1))
    out = np.zeros((len(texels), 4), dtype)
    out[:, 3] = 1
    out[:, : ty.channels] = texels
    return out


def to_texels(ty, v: np.ndarray) -> np.ndarray:
    """``textureStore``'s ``vec4`` values ``v`` (``[lanes, 4]``) as texels of format ``ty``:
    its channels, converted (``rgba8unorm``: ``round(clamp(x, 0, 1) * 255)``; ``rgba8snorm``:
    ``round(clamp(x, -1, 1) * 127)``; NaN as 0; ``rgba16float`` rounded to f16). An integer
    that a narrower integer format cannot hold is left to the implementation by WebGPU: the
    caller checks :func:`unrepresentable` first."""
    v = v[:, : ty.channels]
    if ty.format in ("rgba8unorm", "rgba8snorm"):
        lo = 0.0 if ty.format == "rgba8unorm" else -1.0
        scale = 255.0 if ty.format == "rgba8unorm" else 127.0
        x = np.nan_to_num(v.astype(np.float64), nan=0.0)
        return np.rint(np.clip(x, lo, 1.0) * scale).astype(ty.dtype)
    with np.errstate(over="ignore"):
        return np.ascontiguousarray(v).astype(ty.dtype)


def unrepresentable(ty, v: np.ndarray) -> np.ndarray:
    """Per lane of ``textureStore``'s values ``v`` (``[lanes, 4]``), whether an integer format
    narrower than 32 bits cannot hold one of its channels (``300`` into ``rgba8uint``)."""
    dtype = ty.dtype
    if dtype.kind not in "iu" or dtype.itemsize == 4:
        return np.zeros(len(v), bool)
    info = np.iinfo(dtype)
    x = v[:, : ty.channels].astype(np.int64)
    return ((x < info.min) | (x > info.max)).any(axis=1)
