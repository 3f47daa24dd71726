"""The closed set of IR types.

Every type is a frozen value whose ``str`` is its WGSL spelling. Scalars are singletons
(``u32``, ``f32``, ...); composite types are built with :func:`vec`, :func:`mat`, :func:`array`
and :func:`runtime_array`; the params block is a :class:`Struct`. :func:`align_of`,
:func:`size_of`, :func:`stride` and :func:`field_offsets` are WGSL's layout rules.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class Scalar:
    """One of WGSL's concrete scalar types."""

    name: str

    def __str__(self) -> str:
        return self.name

    @property
    def is_int(self) -> bool:
        return self.name in ("i32", "u32")

    @property
    def is_float(self) -> bool:
        return self.name in ("f32", "f16")

    @property
    def is_numeric(self) -> bool:
        return self.name != "bool"

    @property
    def scalar(self) -> Scalar:
        return self

    @property
    def dtype(self) -> np.dtype:
        """The numpy dtype that holds one value of this type."""
        return np.dtype(_DTYPES[self.name])

    @property
    def size(self) -> int:
        """Bytes one value takes in a storage buffer."""
        return 2 if self.name == "f16" else 4


_DTYPES = {
    "bool": np.bool_,
    "i32": np.int32,
    "u32": np.uint32,
    "f32": np.float32,
    "f16": np.float16,
}

bool_ = Scalar("bool")
i32 = Scalar("i32")
u32 = Scalar("u32")
f32 = Scalar("f32")
f16 = Scalar("f16")
SCALARS = {s.name: s for s in (bool_, i32, u32, f32, f16)}


class _OfScalar:
    """A type of one scalar element type ``elem`` (a vector, a matrix, an atomic): its scalar
    and its kind (integer, float, numeric) are the element's."""

    __slots__ = ()
    elem: Scalar

    @property
    def scalar(self) -> Scalar:
        return self.elem

    @property
    def is_int(self) -> bool:
        return self.elem.is_int

    @property
    def is_float(self) -> bool:
        return self.elem.is_float

    @property
    def is_numeric(self) -> bool:
        return self.elem.is_numeric


@dataclass(frozen=True, slots=True)
class Vec(_OfScalar):
    """``vecN<T>`` for N in 2..4."""

    n: int
    elem: Scalar

    def __str__(self) -> str:
        return f"vec{self.n}<{self.elem}>"

    @property
    def size(self) -> int:
        return self.n * self.elem.size

    @property
    def align(self) -> int:
        return (4 if self.n == 3 else self.n) * self.elem.size


@dataclass(frozen=True, slots=True)
class Mat(_OfScalar):
    """``matCxR<T>`` (C columns, R rows, each in 2..4; T ``f32`` or ``f16``): column-major, each
    column a ``vecR<T>`` with that vector's alignment, so ``mat3x3<f32>``'s columns lie 16 bytes
    apart."""

    c: int
    r: int
    elem: Scalar

    def __str__(self) -> str:
        return f"mat{self.c}x{self.r}<{self.elem}>"

    @property
    def column(self) -> Vec:
        """The type of one column, ``vecR<T>``."""
        return Vec(self.r, self.elem)

    @property
    def size(self) -> int:
        """WGSL's SizeOf: C columns, each ``AlignOf(vecR)`` apart."""
        return self.c * self.column.align

    @property
    def align(self) -> int:
        """WGSL's AlignOf: its column vector's."""
        return self.column.align


def mat(c: int, r: int, elem: Scalar) -> Mat:
    """``matCxR<elem>``; rejects shapes and element types WGSL has no matrix for."""
    if c not in (2, 3, 4) or r not in (2, 3, 4):
        raise ValueError(f"matrix shape {c}x{r}: columns and rows are each 2, 3 or 4")
    if elem not in (f32, f16):
        raise ValueError(f"mat{c}x{r}<{elem}>: a matrix's elements are f32 or f16")
    return Mat(c, r, elem)


@dataclass(frozen=True, slots=True)
class Atomic(_OfScalar):
    """``atomic<u32>`` / ``atomic<i32>``: the element of a read_write storage array or of a
    workgroup array that only the atomic builtins read and write."""

    elem: Scalar

    def __str__(self) -> str:
        return f"atomic<{self.elem}>"

    @property
    def dtype(self) -> np.dtype:
        return self.elem.dtype

    @property
    def size(self) -> int:
        return 4

    @property
    def align(self) -> int:
        return 4


@dataclass(frozen=True, slots=True)
class Array:
    """A fixed-size ``array<T, N>`` (function-scope ``var`` arrays, workgroup arrays); ``T`` a
    scalar, a vector or, in function memory, another fixed-size array."""

    elem: Scalar | Vec | Array | Struct
    n: int

    def __str__(self) -> str:
        return f"array<{self.elem}, {self.n}>"


@dataclass(frozen=True, slots=True)
class RuntimeArray:
    """A runtime-sized ``array<T>``: the type of a storage-buffer binding."""

    elem: Scalar | Vec | Struct

    def __str__(self) -> str:
        return f"array<{self.elem}>"


@dataclass(frozen=True, slots=True)
class Struct:
    """A named struct: the kernel's uniform params block (scalar or vector fields), or the
    element of a storage binding or workgroup array (scalars, vectors, fixed-size arrays of
    them, other structs; a storage binding's struct may end in a runtime-sized array)."""

    name: str
    fields: tuple[tuple[str, Scalar | Vec], ...]
    #: Each member's ``@align(n)`` and ``@size(n)`` (None where it has none), or empty where no
    #: member has either: they set the member's alignment and the bytes it takes
    #: (:func:`field_offsets`, :func:`size_of`).
    layout: tuple[tuple[int | None, int | None], ...] = ()

    def __str__(self) -> str:
        return self.name

    def field(self, name: str) -> Scalar | Vec | None:
        """The type of field ``name``, or None when the struct has no such field."""
        return dict(self.fields).get(name)

    @property
    def size(self) -> int:
        """WGSL's SizeOf: the last member's end rounded up to the struct's alignment."""
        return size_of(self)

    @property
    def align(self) -> int:
        """WGSL's AlignOf: the largest of the members' alignments."""
        return align_of(self)


#: The texel formats of a storage texture: its channels' WGSL type (what ``textureStore``
#: takes a ``vec4`` of), how many channels it keeps, and the numpy dtype the host holds each
#: channel as (``rgba8unorm``: a byte per channel, ``round(clamp(v, 0, 1) * 255)``;
#: ``rgba8snorm``: ``round(clamp(v, -1, 1) * 127)``): WebGPU's storage texture formats.
TEXEL_FORMATS = {
    "rgba8unorm": ("f32", 4, np.uint8),
    "rgba8snorm": ("f32", 4, np.int8),
    "rgba8uint": ("u32", 4, np.uint8),
    "rgba8sint": ("i32", 4, np.int8),
    "rgba16uint": ("u32", 4, np.uint16),
    "rgba16sint": ("i32", 4, np.int16),
    "rgba16float": ("f32", 4, np.float16),
    "rgba32float": ("f32", 4, np.float32),
    "rgba32uint": ("u32", 4, np.uint32),
    "rgba32sint": ("i32", 4, np.int32),
    "rg32float": ("f32", 2, np.float32),
    "rg32uint": ("u32", 2, np.uint32),
    "rg32sint": ("i32", 2, np.int32),
    "r32float": ("f32", 1, np.float32),
    "r32uint": ("u32", 1, np.uint32),
    "r32sint": ("i32", 1, np.int32),
}


#: The storage texture formats WebGPU binds ``read_write`` (the others: ``read`` or ``write``).
READ_WRITE_FORMATS = ("r32float", "r32uint", "r32sint")

#: The sample types of a sampled texture: the texel format the host's array and the GPU texture
#: hold it in (four channels of the type), and the bind group's sample type for it.
SAMPLE_TYPES = {
    "f32": ("rgba32float", np.float32, "unfilterable-float"),
    "u32": ("rgba32uint", np.uint32, "uint"),
    "i32": ("rgba32sint", np.int32, "sint"),
}

#: What the runtime binds a depth texture as: one ``float32`` channel, the bind group's sample
#: type ``depth`` (what a comparison sampler asks for).
DEPTH_TEXTURE = ("depth32float", np.float32, "depth")
#: The formats of a multisampled texture of each sample type: four 16-bit channels, as WebGPU
#: multisamples no format of four 32-bit ones (:func:`kvdsl.ir.texels.multisampled_refusal`).
MULTISAMPLED = {"f32": ("rgba16float",), "u32": ("rgba16uint",), "i32": ("rgba16sint",)}
#: The samples of each texel of a multisampled texture: WebGPU's one count past 1.
SAMPLE_COUNT = 4
#: The format of an external texture's one plane: Dawn takes rgba8unorm, bgra8unorm or
#: rgba16float, a plane of float32 none (:func:`kvdsl.ir.texels.external_refusal`).
EXTERNAL_PLANE = "rgba16float"


@dataclass(frozen=True, slots=True)
class SampledTexture:
    """``texture_2d<T>`` or ``texture_3d<T>`` (``dim`` 2 or 3; T ``f32``, ``u32`` or ``i32``):
    a 2-D or 3-D texture a kernel reads texels of (``textureLoad``) and the size of
    (``textureDimensions``), held as four channels of T (``rgba32float``, ``rgba32uint``,
    ``rgba32sint``), one mip level. ``depth``: ``texture_depth_2d`` (``texture_depth_2d_array``
    arrayed), T ``f32``, one ``float32`` channel held as ``depth32float``, a texel an ``f32``.
    ``cube``: ``texture_cube<T>`` (``texture_depth_cube`` of ``depth``, ``_array`` of
    ``arrayed``): six square faces (``dim`` 2, the size of a face) sampled in a direction.
    ``multisampled``: ``texture_multisampled_2d<T>`` (``texture_depth_multisampled_2d``), texels
    of :data:`SAMPLE_COUNT` samples each, held as four 16-bit channels (:data:`MULTISAMPLED`).
    ``external``: ``texture_external`` (``f32``, ``dim`` 2), a plane of :data:`EXTERNAL_PLANE`."""

    sample: Scalar
    dim: int = 2
    arrayed: bool = False  # texture_2d_array<T>: layers of 2-D textures, one index each
    depth: bool = False  # texture_depth_2d[_array]: one depth value a texel
    cube: bool = False  # texture_cube<T>: six faces, +X, -X, +Y, -Y, +Z, -Z
    multisampled: bool = False  # texture_multisampled_2d<T>: SAMPLE_COUNT samples a texel
    external: bool = False  # texture_external: Dawn's, one RGBA plane, no YUV conversion

    def __str__(self) -> str:
        if self.external:
            return "texture_external"
        shape = "cube" if self.cube else f"{self.dim}d"
        shape = f"multisampled_{shape}" if self.multisampled else shape
        array = "_array" if self.arrayed else ""
        if self.depth:
            return f"texture_depth_{shape}{array}"
        return f"texture_{shape}{array}<{self.sample}>"

    @property
    def texel(self) -> Vec | Scalar:
        """The type ``textureLoad`` returns: a ``vec4`` of the sample type (a depth texture's
        ``f32``)."""
        return self.sample if self.depth else Vec(4, self.sample)

    @property
    def format(self) -> str:
        if self.depth or self.external:
            return DEPTH_TEXTURE[0] if self.depth else EXTERNAL_PLANE
        return (MULTISAMPLED if self.multisampled else SAMPLE_TYPES)[self.sample.name][0]

    @property
    def view_dimension(self) -> str:
        """The dimension of the view the runtime binds it through (``2d-array``, ``cube``)."""
        shape = "cube" if self.cube else f"{self.dim}d"
        return f"{shape}-array" if self.arrayed else shape

    @property
    def binding_sample_type(self) -> str:
        """The bind group layout's sample type for it."""
        return DEPTH_TEXTURE[2] if self.depth else SAMPLE_TYPES[self.sample.name][2]

    @property
    def channels(self) -> int:
        return 1 if self.depth else 4

    @property
    def dtype(self) -> np.dtype:
        """The numpy dtype the host holds each channel as."""
        return np.dtype(SAMPLE_TYPES[self.sample.name][1])


@dataclass(frozen=True, slots=True)
class Sampler:
    """``sampler``: how ``textureSampleLevel`` reads a ``texture_2d<f32>`` or ``texture_3d<f32>``
    at normalised coordinates. The host binds WebGPU's default sampler (the descriptor ``{}``:
    nearest filtering, each coordinate clamped to the edge), which the interpreter samples as.
    ``comparison``: ``sampler_comparison``, how ``textureSampleCompareLevel`` compares a depth
    texture's texel with a reference: the default sampler with the compare function
    :data:`COMPARE` (``{"compare": "less"}``)."""

    comparison: bool = False

    def __str__(self) -> str:
        return "sampler_comparison" if self.comparison else "sampler"


#: The compare function of the ``sampler_comparison`` the runtime binds: the reference passes
#: (1.0) where it is less than the texel, else fails (0.0).
COMPARE = "less"


@dataclass(frozen=True, slots=True)
class StorageTexture:
    """``texture_storage_2d<format, access>`` (``texture_storage_3d`` of ``dim`` 3): a storage
    texture a kernel writes texels of (``textureStore``; ``access`` ``write`` or
    ``read_write``), reads texels of (``textureLoad``; ``read`` or ``read_write``) and reads the
    size of (``textureDimensions``). ``arrayed``: ``texture_storage_2d_array``, layers of 2-D
    textures, each texel access given an array index."""

    format: str
    access: str = "write"
    dim: int = 2
    arrayed: bool = False

    def __str__(self) -> str:
        array = "_array" if self.arrayed else ""
        return f"texture_storage_{self.dim}d{array}<{self.format}, {self.access}>"

    @property
    def view_dimension(self) -> str:  # of the view the runtime binds it through
        return f"{self.dim}d-array" if self.arrayed else f"{self.dim}d"

    @property
    def texel(self) -> Vec:
        """``textureStore``'s value: a ``vec4`` of u32 (``*uint``), i32 (``*sint``) or f32."""
        return Vec(4, SCALARS[{"uint": "u32", "sint": "i32"}.get(self.format[-4:], "f32")])

    @property
    def channels(self) -> int:
        return TEXEL_FORMATS[self.format][1]

    @property
    def dtype(self) -> np.dtype:
        """The numpy dtype the host holds each channel as."""
        return np.dtype(TEXEL_FORMATS[self.format][2])


#: The handle types a module var, a ``Kernel.textures`` entry and a helper's parameter may hold.
HANDLES = (StorageTexture, SampledTexture, Sampler)


def atomic(elem: Scalar) -> Atomic:
    """``atomic<elem>`` for ``u32`` or ``i32`` (WGSL has no other atomic type)."""
    if elem not in (u32, i32):
        raise ValueError(f"atomic<{elem}>: WGSL's atomics are atomic<u32> and atomic<i32>")
    return Atomic(elem)


def compare_exchange_result(elem: Scalar) -> Struct:
    """The struct ``atomicCompareExchangeWeak`` returns: ``old_value`` and ``exchanged``."""
    return Struct(
        f"__atomic_compare_exchange_result_{elem}", (("old_value", elem), ("exchanged", bool_))
    )


def result_struct(builtin: str, ty: Scalar | Vec) -> Struct:
    """The struct ``frexp`` or ``modf`` returns for a float scalar or vector ``ty``: WGSL's
    ``__frexp_result_f32`` (``fract: f32, exp: i32``), ``__modf_result_vec4_f32`` (``fract``,
    ``whole``) ..., which a kernel cannot name, only bind with ``let`` and read fields of."""
    shape = "" if isinstance(ty, Scalar) else f"vec{ty.n}_"
    if builtin == "frexp":
        exp = i32 if isinstance(ty, Scalar) else Vec(ty.n, i32)
        return Struct(f"__frexp_result_{shape}{ty.scalar}", (("fract", ty), ("exp", exp)))
    return Struct(f"__modf_result_{shape}{ty.scalar}", (("fract", ty), ("whole", ty)))


def is_result_struct(ty: object) -> bool:
    """Whether ``ty`` is one of :func:`result_struct`'s (named by WGSL, not by a kernel)."""
    return isinstance(ty, Struct) and ty.name.startswith(("__frexp_result_", "__modf_result_"))


#: WGSL's address spaces a pointer may name, and the access mode each has: ``function``,
#: ``private`` and ``workgroup`` memory is read_write; ``storage`` is ``read`` or ``read_write``;
#: ``uniform`` is ``read``.
POINTER_SPACES = ("function", "private", "workgroup", "storage", "uniform")


@dataclass(frozen=True, slots=True)
class Ptr:
    """``ptr<space, T[, access]>``: the type of a pointer, the value of ``&x``. Only a ``let``
    and a helper's parameter hold one; ``*p`` is the memory it points at. The access mode is
    spelled only for ``storage`` (``uniform`` is always ``read``, the others ``read_write``)."""

    space: str
    store: Scalar | Vec | Mat | Array | RuntimeArray
    access: str = "read_write"

    def __str__(self) -> str:
        if self.space == "storage":
            return f"ptr<storage, {self.store}, {self.access}>"
        return f"ptr<{self.space}, {self.store}>"


Type = Scalar | Vec | Mat | Atomic | Array | RuntimeArray | Struct | Ptr


def align_of(ty: Scalar | Vec | Array | Struct) -> int:
    """WGSL's AlignOf(T) in storage and workgroup memory: a scalar or atomic its size, ``vecN<T>`` N
    (3 counts as 4) times the scalar's, an array its element's, a struct its members' largest."""
    if isinstance(ty, (Scalar, Atomic)):
        return ty.size
    if isinstance(ty, (Vec, Mat)):
        return ty.align
    if isinstance(ty, (Array, RuntimeArray)):
        return align_of(ty.elem)
    return max(member_align(ty, k) for k in range(len(ty.fields)))


def size_of(ty: Scalar | Vec | Array | Struct) -> int:
    """WGSL's SizeOf(T): an array ``n`` strides (:func:`stride`), a struct its last member's
    end rounded up to the struct's alignment (a runtime-sized last member counts as empty)."""
    if isinstance(ty, (Scalar, Vec, Mat, Atomic)):
        return ty.size
    if isinstance(ty, Array):
        return ty.n * stride(ty.elem)
    if isinstance(ty, RuntimeArray):
        return 0
    offsets = field_offsets(ty)
    return _round_up(offsets[-1] + member_size(ty, len(ty.fields) - 1), align_of(ty))


def stride(elem: Scalar | Vec | Array | Struct) -> int:
    """The byte distance between elements of ``array<elem>``: roundUp(AlignOf, SizeOf)."""
    return _round_up(size_of(elem), align_of(elem))


def field_offsets(s: Struct) -> tuple[int, ...]:
    """Each member's byte offset: the previous member's end rounded up to its alignment
    (:func:`member_align`), a member ending :func:`member_size` bytes past its offset."""
    out, at = [], 0
    for k in range(len(s.fields)):
        at = _round_up(at, member_align(s, k))
        out.append(at)
        at += member_size(s, k)
    return tuple(out)


def member_align(s: Struct, k: int) -> int:
    """WGSL's AlignOfMember: member ``k``'s ``@align(n)``, else its type's alignment."""
    given = s.layout[k][0] if s.layout else None
    return align_of(s.fields[k][1]) if given is None else given


def member_size(s: Struct, k: int) -> int:
    """WGSL's SizeOfMember: member ``k``'s ``@size(n)``, else its type's size."""
    given = s.layout[k][1] if s.layout else None
    return size_of(s.fields[k][1]) if given is None else given


def _round_up(n: int, k: int) -> int:
    return (n + k - 1) // k * k


def held_as_words(ty: object) -> bool:
    """Whether a storage binding's element ``ty`` is held as ``u32`` words (16-bit halves where
    it holds an f16: :func:`memory_unit`) in WGSL's layout: a struct, a fixed-size array
    (``array<array<f32, 4>>``: each element a block of words) or a matrix (its columns, each
    padded to its vector's alignment)."""
    return isinstance(ty, (Struct, Array, Mat))


def holds_f16(ty: object) -> bool:
    """Whether ``ty`` is or holds an ``f16`` (a scalar, a vector's or matrix's element, a
    member of a struct or an element of an array, at any depth)."""
    if isinstance(ty, (Scalar, Vec, Mat)):
        return ty.scalar is f16
    if isinstance(ty, (Array, RuntimeArray)):
        return holds_f16(ty.elem)
    if isinstance(ty, Struct):
        return any(holds_f16(t) for _, t in ty.fields)
    return False


def holds_atomic(ty: object) -> bool:
    """Whether ``ty`` is or holds an ``atomic<T>`` (an element of an array or a member of a
    struct, at any depth)."""
    if isinstance(ty, Atomic):
        return True
    if isinstance(ty, (Array, RuntimeArray)):
        return holds_atomic(ty.elem)
    return isinstance(ty, Struct) and any(holds_atomic(t) for _, t in ty.fields)


def memory_unit(ty: object) -> int:
    """The bytes of the unit memory holding ``ty`` is addressed in (:func:`held_as_words`): 2,
    a 16-bit half, where ``ty`` holds an ``f16`` (its members may lie 2 bytes apart); else 4,
    a 32-bit word. Every offset :func:`field_offsets` and :func:`stride` give is a multiple of
    it (an f16-holding type's alignment is at least 2, any other's at least 4)."""
    return 2 if holds_f16(ty) else 4


def workgroup_words(ty: object) -> bool:
    """Whether a ``var<workgroup>`` of type ``ty`` is held as words (:class:`SharedArray`): an
    array whose leaf is a struct or a matrix, arrays nested three levels deep or more (two
    levels of scalars or vectors are held flat, element by element), or a var that is one
    scalar, vector, matrix or struct (not an atomic)."""
    if not isinstance(ty, Array):
        return not isinstance(ty, Atomic)
    deep = isinstance(ty.elem, Array) and isinstance(ty.elem.elem, Array)
    return deep or isinstance(array_leaf(ty), (Struct, Mat))


def array_leaf(ty: object) -> object:
    """The element under any nesting of fixed-size arrays: ``array<array<vec3<f32>, 2>, 4>``
    gives ``vec3<f32>``."""
    while isinstance(ty, Array):
        ty = ty.elem
    return ty


def bitcastable(ty: object) -> bool:
    """Whether ``bitcast`` takes or gives ``ty``: a 32-bit scalar (``u32``, ``i32``, ``f32``) or a
    vector of them."""
    s = ty.elem if isinstance(ty, Vec) else ty
    return s is u32 or s is i32 or s is f32


def components(ty: Scalar | Vec) -> int:
    """How many components a scalar (1) or a vector (``n``) has."""
    return ty.n if isinstance(ty, Vec) else 1


def vec(n: int, elem: Scalar) -> Vec:
    """``vecN<elem>``; rejects sizes and element types WGSL has no vector for."""
    if n not in (2, 3, 4):
        raise ValueError(f"vector size {n} is not one of 2, 3, 4")
    if not isinstance(elem, Scalar):
        raise ValueError(f"vector element {elem} is not a scalar")
    return Vec(n, elem)


def array(elem: Scalar | Vec, n: int) -> Array:
    """``array<elem, n>`` with a positive constant size."""
    if not isinstance(n, int) or n <= 0:
        raise ValueError(f"array size {n!r} is not a positive integer")
    return Array(elem, n)


def runtime_array(elem: Scalar | Vec) -> RuntimeArray:
    """``array<elem>``, the element type of a storage binding."""
    return RuntimeArray(elem)


vec3u = Vec(3, u32)
