"""A kernel and its module-scope declarations: consts, helper functions, storage bindings,
workgroup and private vars, textures, uniforms and the dispatch rule (:class:`Kernel` holds them
with its body). Re-exported by :mod:`kvdsl.ir.tree`, where the expressions and statements they
hold are."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kvdsl.ir.types import (
    Array,
    Mat,
    Ptr,
    Scalar,
    SampledTexture,
    Sampler,
    StorageTexture,
    Struct,
    Vec,
    array_leaf,
    f16,
    held_as_words,
    memory_unit,
    stride,
    u32,
)

if TYPE_CHECKING:
    from kvdsl.ir.tree import Expr, Stmt

#: What :mod:`kvdsl.ir.tree` and :mod:`kvdsl.ir` re-export (``ir.Kernel``, ``ir.Binding``, ...).
__all__ = [
    "Binding",
    "Const",
    "Dispatch",
    "Function",
    "Kernel",
    "PrivateVar",
    "Texture",
    "Uniform",
    "WorkgroupVar",
]


@dataclass(frozen=True, slots=True)
class Const:
    """A module-scope ``const NAME: T = value;`` of a scalar, vector, matrix or fixed-size array
    type."""

    name: str
    ty: Scalar | Vec | Mat | Array
    value: Expr
    comment: str = ""


@dataclass(frozen=True, slots=True)
class Function:
    """A helper ``fn name(params) -> ret { body }``."""

    name: str
    params: tuple[tuple[str, Scalar | Vec | Ptr], ...]
    ret: Scalar | Vec | None
    body: tuple[Stmt, ...]


@dataclass(frozen=True, slots=True)
class Binding:
    """A storage buffer ``var<storage, access> name: array<elem>``.

    ``data`` is the scalar type of the host's array when it differs from the element's scalar:
    a flat f16 data move declares ``array<vec4<u32>>`` words and the host passes float16 arrays,
    eight halves per element (the bytes are the same; the kernel never computes on them).
    """

    name: str
    elem: Scalar | Vec | Struct | Array  # an Array: array<array<f32, 4>> (held as words)
    access: str  # "read" or "read_write"
    data: Scalar | None = None
    #: The binding is one ``elem`` struct ending in a runtime-sized array
    #: (``var<storage> rows: Rows;``), not ``array<elem>``.
    whole: bool = False

    @property
    def host(self) -> Scalar:
        """The scalar type of the host's array (``data``, else the element's scalar; an array
        of structs is held as ``u32`` words in WGSL's layout; an array of arrays as its scalars,
        in that layout)."""
        if held_as_words(self.elem) and self.data is None:
            leaf = array_leaf(self.elem)
            if isinstance(leaf, Struct):  # u32 words, or f16 halves where it holds an f16
                return u32 if memory_unit(self.elem) == 4 else f16
            return leaf.scalar
        return self.elem.scalar if self.data is None else self.data

    @property
    def host_values(self) -> int:
        """How many host values one element holds (``vec4<u32>`` of f16 data: 8; a struct:
        its array stride in words)."""
        if held_as_words(self.elem):
            return 1 if self.whole else stride(self.elem) // self.host.size
        n = self.elem.n if isinstance(self.elem, Vec) else 1
        return n if self.data is None else n * self.elem.scalar.size // self.data.size


@dataclass(frozen=True, slots=True)
class WorkgroupVar:
    """A module-scope ``var<workgroup> name: array<T, N>;``: memory shared by the invocations of
    one workgroup (zero at the start of the dispatch), indexed one element at a time; or
    ``var<workgroup> name: atomic<u32>;`` (``ty`` an ``Atomic``), one atomic of its own."""

    name: str
    ty: Array


@dataclass(frozen=True, slots=True)
class Texture:
    """A texture binding: ``var name: texture_storage_2d<format, write>;``, which the host gives
    as a ``[height, width, channels]`` array of the format's dtype and takes back, or ``var
    name: texture_2d<T>;`` (``texture_3d<T>``), which the host gives as ``[height, width, 4]``
    (``[depth, height, width, 4]``) of T's dtype (each kind's axes:
    :func:`kvdsl.ir.texels.host_axes`); or a sampler binding, ``var name: sampler;`` (or
    ``sampler_comparison``), which the host gives nothing for (WebGPU's default sampler is
    bound)."""

    name: str
    ty: StorageTexture | SampledTexture | Sampler


@dataclass(frozen=True, slots=True)
class PrivateVar:
    """A module-scope ``var<private> name: T[ = init];``: a var of each invocation's own, seen
    by the entry point and every helper, starting as ``init`` (a const-expression) or zero."""

    name: str
    ty: Scalar | Vec | Mat | Array | Struct
    init: Expr | None = None


@dataclass(frozen=True, slots=True)
class Uniform:
    """A ``var<uniform> name: T;`` other than the params struct: of any name, any number of
    them, ``T`` a scalar, vector, matrix, fixed-size array or struct (a value in the uniform
    address space, read by name: ``n``, ``u.scale``, ``u.taps[i]``). The host gives its value
    by its name beside the params fields; the emitter numbers it after the params uniform."""

    name: str
    ty: Scalar | Vec | Mat | Array | Struct


@dataclass(frozen=True, slots=True)
class Dispatch:
    """How many workgroups a dispatch needs.

    ``items`` (an expression over params fields and module consts) is the number of work items;
    each workgroup takes ``per_group`` of them. The workgroup count ``ceil(items / per_group)``
    goes in x up to ``fold``; past that, y = ``ceil(count / fold)`` rows carry it, and x is
    exactly ``fold`` (the kernel's index math relies on ``gid.y * fold``: the template's rule)
    or, ``balanced``, ``ceil(count / y)`` (the kernel reads x back from ``num_workgroups``): at
    most ``y - 1`` workgroups past the end instead of up to ``fold - 1``.
    """

    items: Expr
    per_group: int
    fold: int
    balanced: bool = False


@dataclass(frozen=True, slots=True)
class Kernel:
    """A compute kernel: its interface (bindings, params, workgroup size, dispatch) and body."""

    name: str
    bindings: tuple[Binding, ...]
    params: Struct | None
    consts: tuple[Const, ...]
    functions: tuple[Function, ...]
    workgroup_size: tuple[int, int, int]
    builtins: tuple[tuple[str, str], ...]  # (parameter name, builtin name)
    body: tuple[Stmt, ...]
    dispatch: Dispatch | None = None
    doc: tuple[str, ...] = field(default=())
    workgroup_size_name: str | None = None  # a const that spells the size in WGSL, e.g. "WG"
    # The host-side contract, checked before a dispatch (kvdsl.runtime.contract): ``extents`` gives
    # (binding, least element count) and ``requires`` (description, boolean condition), both
    # over params fields, module consts and ``binding.max`` (the largest value of an integer
    # input buffer). WGSL text does not carry them (a parsed kernel has none), so they are left
    # out of equality like a comment would be.
    extents: tuple[tuple[str, Expr], ...] = field(default=(), compare=False)
    requires: tuple[tuple[str, Expr], ...] = field(default=(), compare=False)
    workgroup_vars: tuple[WorkgroupVar, ...] = ()
    # ``enable`` directives of the extensions the IR does not decide (``enable clip_distances``),
    # ``requires`` and ``diagnostic`` directives, as their WGSL text without the semicolon
    # (``requires packed_4x8_integer_dot_product``); module-scope ``const_assert`` conditions.
    directives: tuple[str, ...] = ()
    asserts: tuple[Expr, ...] = ()
    # The uniforms other than params (numbered after it), and the module's var<private>s.
    uniforms: tuple[Uniform, ...] = ()
    private_vars: tuple[PrivateVar, ...] = ()
    textures: tuple[Texture, ...] = ()  # numbered after the uniforms

    def binding(self, name: str) -> Binding | None:
        return next((b for b in self.bindings if b.name == name), None)

    def const(self, name: str) -> Const | None:
        return next((c for c in self.consts if c.name == name), None)
