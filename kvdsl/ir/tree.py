"""IR expressions, statements and module items: frozen dataclasses with tuple children.

Structural equality and hashing come for free; :func:`dataclasses.replace` rewrites. Expressions
carry no types except literals and conversions: :mod:`kvdsl.ir.verify` derives every other type
from the declarations in scope, so a kernel parsed back from WGSL compares equal to the one built.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvdsl.ir.builtins import (  # noqa: F401 (re-exported: ir.BUILTIN_INPUTS, ir.builtin_type)
    ATOMIC_FUNCTIONS,
    BUILTIN_INPUTS,
    SCALAR_BUILTINS,
    SUBGROUP_BUILTINS,
    UNIFORM_BUILTINS,
    builtin_type,
)
from kvdsl.ir.ops import Op
from kvdsl.ir.slots import slot_init
from kvdsl.ir.types import Array, Mat, Scalar, Struct, Vec  # noqa: F401 (Struct re-exported)

# ---- expressions ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Lit:
    """A concrete literal: ``3u``, ``-2i``, ``0.5f``, ``true``."""

    value: int | float | bool
    ty: Scalar


@dataclass(frozen=True, slots=True)
class Name:
    """A reference to a let, var, parameter, module const, binding or compute builtin."""

    name: str


@dataclass(frozen=True, slots=True)
class Unary:
    op: Op
    x: Expr


@dataclass(frozen=True, slots=True)
class Binary:
    op: Op
    a: Expr
    b: Expr


@dataclass(frozen=True, slots=True)
class Call:
    """A builtin call from the op table (``min``, ``select``, ``inverseSqrt`` ...)."""

    op: Op
    args: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class FnCall:
    """A call of a module helper function."""

    name: str
    args: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Convert:
    """A value conversion ``T(x)`` to a scalar or vector type (saturating for float → int), or
    between ``f32`` and ``f16`` matrices of one shape (each element rounded)."""

    ty: Scalar | Vec | Mat
    x: Expr


@dataclass(frozen=True, slots=True)
class Bitcast:
    """``bitcast<T>(x)``: the bits of a 32-bit scalar or vector as another 32-bit type of as many
    components (``u32``, ``i32``, ``f32``)."""

    ty: Scalar | Vec
    x: Expr


@dataclass(frozen=True, slots=True)
class Construct:
    """A vector or array built from components: ``vec4<f32>(a, b, c, d)``."""

    ty: Vec | Array
    args: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Index:
    """``base[index]`` on a binding, a ``var`` array or a vector."""

    base: Expr
    index: Expr


@dataclass(frozen=True, slots=True)
class Member:
    """``base.name``: a params field or a vector swizzle (``gid.x``, ``v.xy``)."""

    base: Expr
    name: str


@dataclass(frozen=True, slots=True)
class ArrayLength:
    """``arrayLength(&name)``: the element count of storage binding ``name`` (a ``u32``, the
    same for every invocation); with ``member``, ``arrayLength(&name.member)``, the runtime-sized
    last member of a binding that is one struct; with ``pointer``, ``arrayLength(name)`` of a
    helper's parameter ``name``, a ``ptr<storage, array<T>, access>``: the count of the array
    it points at."""

    name: str
    member: str | None = None
    pointer: bool = False


@dataclass(frozen=True, slots=True)
class TextureLoad:
    """``textureLoad(name, coords, level)``: texel ``coords`` (a ``vec2<i32>`` or ``vec2<u32>``,
    x then y; ``vec3`` of a ``texture_3d``) of mip level ``level`` (an ``i32`` or ``u32``) of
    sampled texture ``name``, a ``vec4`` of its sample type; ``textureLoad(name, coords)`` (no
    ``level``) of a storage texture of ``read`` or ``read_write`` access, a ``vec4`` of its
    format's channel type (an ``r32`` format's ``(x, 0, 0, 1)``). Of a multisampled texture,
    ``level`` is the sample index (an ``i32`` or ``u32``). Of a ``texture_2d_array``,
    ``layer`` is the array index (an ``i32`` or ``u32``), written before the level."""

    name: str
    coords: Expr
    level: Expr | None = None
    layer: Expr | None = None


@dataclass(frozen=True, slots=True)
class TextureSampleLevel:
    """``textureSampleLevel(name, sampler, coords, level)``: texture ``name`` (a
    ``texture_2d<f32>`` or ``texture_3d<f32>``) sampled through ``sampler`` at ``coords`` (a
    ``vec2<f32>`` or ``vec3<f32>`` of normalised coordinates, x first) and mip level ``level``
    (an ``f32``), a ``vec4<f32>``; of a ``texture_2d_array<f32>``, ``layer`` is the array
    index (an ``i32`` or ``u32``), written before the level."""

    name: str
    sampler: str
    coords: Expr
    level: Expr
    layer: Expr | None = None
    offset: Expr | None = None  # a const vecN<i32> in -8..7, added to the texel coordinates


@dataclass(frozen=True, slots=True)
class TextureSampleCompare:
    """``textureSampleCompareLevel(name, sampler, coords, depth_ref)``: depth texture ``name``
    (a ``texture_depth_2d``) sampled through comparison sampler ``sampler`` at ``coords`` (a
    ``vec2<f32>`` of normalised coordinates) on mip level 0, the texel compared with
    ``depth_ref`` (an ``f32``): an ``f32``, 1.0 where the comparison passes, else 0.0. Of a
    ``texture_depth_2d_array``, ``layer`` is the array index (an ``i32`` or ``u32``), written
    before ``depth_ref``. ``gather``: ``textureGatherCompare(...)`` of the same arguments, the
    four texels a bilinear filter would read each compared, a ``vec4<f32>``."""

    name: str
    sampler: str
    coords: Expr
    depth_ref: Expr
    layer: Expr | None = None
    gather: bool = False
    offset: Expr | None = None


@dataclass(frozen=True, slots=True)
class TextureGather:
    """``textureGather(component, name, sampler, coords)``: the four texels a bilinear filter
    reads of 2-D texture ``name`` at ``coords`` (a ``vec2<f32>``), through ``sampler``, their
    channel ``component`` (an ``i32`` or ``u32`` const-expression, 0 to 3) as a ``vec4`` of
    the sample type, in WGSL's order ``(umin, vmax), (umax, vmax), (umax, vmin), (umin,
    vmin)``. Of a depth texture, ``component`` is None (the call has none) and the texels'
    depths a ``vec4<f32>``; of an arrayed texture, ``layer`` is the array index (an ``i32`` or
    ``u32``), written after the coordinates."""

    name: str
    sampler: str
    coords: Expr
    component: Expr | None = None
    layer: Expr | None = None
    offset: Expr | None = None


@dataclass(frozen=True, slots=True)
class TextureSampleGrad:
    """``textureSampleGrad(name, sampler, coords, ddx, ddy)``: texture ``name`` (a
    ``texture_2d<f32>``, ``texture_3d<f32>`` or cube of ``f32``) sampled through ``sampler``
    at ``coords`` with the level the gradients ``ddx`` and ``ddy`` (of ``coords``' type) pick,
    a ``vec4<f32>``; of an arrayed texture, ``layer`` is the array index, written before the
    gradients."""

    name: str
    sampler: str
    coords: Expr
    ddx: Expr
    ddy: Expr
    layer: Expr | None = None
    offset: Expr | None = None


@dataclass(frozen=True, slots=True)
class TextureSampleBaseClampToEdge:
    """``textureSampleBaseClampToEdge(name, sampler, coords)``: ``texture_2d<f32>`` ``name``
    sampled through ``sampler`` at ``coords`` (a ``vec2<f32>``) on mip level 0, the coordinates
    clamped to half a texel inside the edge, a ``vec4<f32>``."""

    name: str
    sampler: str
    coords: Expr


@dataclass(frozen=True, slots=True)
class TextureNumLevels:
    """``textureNumLevels(name)``: the ``u32`` count of mip levels of sampled texture
    ``name``."""

    name: str


@dataclass(frozen=True, slots=True)
class TextureNumSamples:
    """``textureNumSamples(name)``: the ``u32`` count of samples of each texel of multisampled
    texture ``name``."""

    name: str


@dataclass(frozen=True, slots=True)
class TextureNumLayers:
    """``textureNumLayers(name)``: the ``u32`` count of layers of ``texture_2d_array`` ``name``
    (the same for every invocation)."""

    name: str


@dataclass(frozen=True, slots=True)
class TextureDimensions:
    """``textureDimensions(name)``: the ``vec2<u32>`` width and height of texture ``name`` (the
    same for every invocation); ``textureDimensions(name, level)`` those of mip level ``level``
    (an ``i32`` or ``u32``) of a sampled texture."""

    name: str
    level: Expr | None = None


@dataclass(frozen=True, slots=True)
class AtomicCall:
    """``atomicFn(&target, args...)`` (``fn`` one of :data:`ATOMIC_FUNCTIONS`, ``Add`` say):
    ``target`` is an element of an ``array<atomic<T>>`` storage binding or workgroup array.
    Its value is the element's value before the operation (``Load``: the value; ``Store``:
    none, a statement only; ``CompareExchangeWeak``: the ``old_value`` / ``exchanged``
    struct)."""

    fn: str
    target: Expr
    args: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class AddressOf:
    """``&x``: a pointer to the memory ``x`` names (a ``var``, a binding, a workgroup array, an
    element of one, or ``*p``). Its indices are evaluated here, once."""

    x: Expr


@dataclass(frozen=True, slots=True)
class UniformLoad:
    """``workgroupUniformLoad(p)``: the value ``p`` (a pointer into workgroup memory, to a
    type without atomics) points at, the same in every invocation of the workgroup, with a
    workgroup barrier before and after the load. Only in uniform control flow, with ``p``
    uniform (see verify)."""

    x: Expr


@dataclass(frozen=True, slots=True)
class Deref:
    """``*p``: the memory pointer ``p`` points at, read as a value or assigned to; ``(*p)[i]``
    and ``(*p).x`` reach into it."""

    x: Expr


Expr = (
    Lit
    | Name
    | Unary
    | Binary
    | Call
    | FnCall
    | Convert
    | Bitcast
    | Construct
    | Index
    | Member
    | ArrayLength
    | TextureDimensions
    | TextureLoad
    | TextureSampleLevel
    | TextureSampleCompare
    | TextureGather
    | TextureSampleGrad
    | TextureNumLayers
    | TextureNumSamples
    | TextureNumLevels
    | TextureSampleBaseClampToEdge
    | AtomicCall
    | AddressOf
    | Deref
    | UniformLoad
)

# ---- statements -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Let:
    name: str
    value: Expr


@dataclass(frozen=True, slots=True)
class Var:
    """A function-scope ``var`` with an explicit type and optional initialiser."""

    name: str
    ty: Scalar | Vec | Array
    init: Expr | None = None


@dataclass(frozen=True, slots=True)
class Assign:
    """``target = value`` or, with ``op``, the compound ``target op= value``.

    A target is a local ``var`` name, an element of one, or an element of a read_write binding
    (a store).
    """

    target: Expr
    value: Expr
    op: Op | None = None


@dataclass(frozen=True, slots=True)
class If:
    cond: Expr
    then: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...] = ()


@dataclass(frozen=True, slots=True)
class For:
    """``for (init; cond; update) { body }``."""

    init: Var | Let | None
    cond: Expr | None
    update: Assign | None
    body: tuple[Stmt, ...]


@dataclass(frozen=True, slots=True)
class Loop:
    """``loop { body continuing { continuing break if break_if; } }``, left by ``break``,
    ``return`` or the ``break if``. The ``continuing`` block runs after each trip of the body
    (after a ``continue`` too), in the body's scope; then a true ``break_if`` leaves."""

    body: tuple[Stmt, ...]
    continuing: tuple[Stmt, ...] = ()
    break_if: Expr | None = None


@dataclass(frozen=True, slots=True)
class Case:
    """One clause of a ``switch``: its selectors (None is ``default``) and its body."""

    selectors: tuple[Expr | None, ...]
    body: tuple[Stmt, ...]


@dataclass(frozen=True, slots=True)
class Switch:
    """``switch selector { case 1, 2 { } default { } }``: the clause whose selector equals the
    value runs (else the one holding ``default``); a ``break`` in it leaves the switch."""

    selector: Expr
    cases: tuple[Case, ...]


@dataclass(frozen=True, slots=True)
class ConstAssert:
    """``const_assert cond;``: WGSL refuses the module when the constant ``cond`` is false."""

    cond: Expr


@dataclass(frozen=True, slots=True)
class Break:
    pass


@dataclass(frozen=True, slots=True)
class Continue:
    pass


@dataclass(frozen=True, slots=True)
class Return:
    value: Expr | None = None


@dataclass(frozen=True, slots=True)
class Block:
    """A nested ``{ ... }`` scope."""

    body: tuple[Stmt, ...]


@dataclass(frozen=True, slots=True)
class Comment:
    """An author's comment line, printed as ``// text``."""

    text: str


@dataclass(frozen=True, slots=True)
class CallStmt:
    """A helper call as a statement, its value (if it returns one) discarded:
    ``update(i, j, scale);``. WGSL refuses a builtin there (they are ``@must_use``)."""

    call: FnCall


@dataclass(frozen=True, slots=True)
class Barrier:
    """``workgroupBarrier();``: every invocation of the workgroup waits here, and workgroup
    memory written before it is visible after it. Only in uniform control flow (see verify).
    With ``space`` ``"storage"``, ``storageBarrier();``: the same wait, and storage memory
    written before it is visible after it to the workgroup's invocations; with ``"texture"``,
    ``textureBarrier();``: the same, of the storage textures."""

    space: str = "workgroup"


@dataclass(frozen=True, slots=True)
class AtomicStmt:
    """An atomic builtin as a statement, its value (if any) discarded: ``atomicStore(&a[i],
    v);``, ``atomicAdd(&count[0], 1u);``."""

    call: AtomicCall


@dataclass(frozen=True, slots=True)
class TextureStore:
    """``textureStore(name, coords, value);``: texel ``coords`` (a ``vec2<i32>`` or
    ``vec2<u32>``, x then y) of storage texture ``name`` set to ``value`` (a ``vec4`` of the
    format's channel type, converted to the format); coordinates outside the texture store
    nothing, as WGSL says. Of a ``texture_storage_2d_array``, ``layer`` is the array index (an
    ``i32`` or ``u32``), written before the value."""

    name: str
    coords: Expr
    value: Expr
    layer: Expr | None = None


Stmt = (
    Let
    | Var
    | Assign
    | If
    | For
    | Loop
    | Break
    | Continue
    | Return
    | Block
    | Comment
    | Barrier
    | CallStmt
    | Switch
    | ConstAssert
    | AtomicStmt
    | TextureStore
)


for _cls in (*Expr.__args__, *Stmt.__args__):  # classes without fields keep theirs
    slot_init(_cls)
del _cls

# ---- module items: kvdsl.ir.kernel ---------------------------------------------------------

from kvdsl.ir.kernel import *  # noqa: E402,F403 (re-exported: ir.Kernel, ir.Binding, ...)

_CHILDREN: dict[type, tuple[str, ...]] = {}
_LEAVES = (str, int, float, bool, type(None), Op)


def walk(node: object):
    """Every IR node, type and tuple reachable from ``node`` (itself included), depth first.

    Leaf values (names, numbers, ops) are not yielded. Iterative, with each class's child fields
    looked up once: verification and emission walk every kernel, so this is on the hot path.
    """
    stack = [node]
    pop, push, append = stack.pop, stack.extend, stack.append
    while stack:
        n = pop()
        yield n
        if type(n) is tuple:
            push(reversed(n))
            continue
        names = _CHILDREN.get(type(n))  # the child fields, last first
        if names is None:
            names = tuple(reversed(tuple(getattr(type(n), "__dataclass_fields__", ()))))
            _CHILDREN[type(n)] = names
        for f in names:
            c = getattr(n, f)
            if not isinstance(c, _LEAVES):
                append(c)
