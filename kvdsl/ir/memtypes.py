"""What storage and workgroup memory hold: the checks of a binding's or a workgroup var's
struct, array and matrix types (the members, element types and nesting WGSL takes in memory),
whether a binding's host data tiles its element type, and the bytes a workgroup var takes.
"""

from __future__ import annotations

from kvdsl.ir import tree as ir
from kvdsl.ir.scope import VerifyError, check_name
from kvdsl.ir.types import (
    Array,
    Atomic,
    Mat,
    RuntimeArray,
    Scalar,
    Struct,
    Vec,
    array_leaf,
    bool_,
    f16,
    f32,
    i32,
    size_of,
    u32,
)


def check_memory_struct(
    what: str, st: Struct, whole: bool = False, workgroup: bool = False
) -> None:
    """A struct a storage binding or workgroup array holds: members u32, i32, f32 or f16
    scalars, vectors of them, matrices, atomics, other structs, or fixed-size arrays of those;
    in ``workgroup`` memory (not host-shareable) bool ones too; a binding that is one struct
    (``whole``) ends in a runtime-sized array of those."""
    if not st.fields:
        raise VerifyError(f"{what}: struct {st.name} has no members (WGSL takes at least one)")
    seen = set()
    for name, ty in st.fields:
        check_name(name, st)
        if name in seen:
            raise VerifyError(f"{what}: struct {st.name} declares member '{name}' twice")
        seen.add(name)
        last = name == st.fields[-1][0]
        if isinstance(ty, RuntimeArray) and not (whole and last):
            raise VerifyError(
                f"{what}: struct {st.name} member {name}: {ty} (a runtime-sized array is the "
                "last member of a struct that is a whole storage binding)"
            )
        inner = array_leaf(ty.elem if isinstance(ty, RuntimeArray) else ty)
        if isinstance(inner, Atomic) and inner.elem in (u32, i32):
            continue
        if isinstance(inner, Struct):  # a struct inside a struct
            check_memory_struct(what, inner, workgroup=workgroup)
            continue
        if isinstance(inner, Mat):
            check_memory_matrix(f"{what}: struct {st.name} member {name}", inner)
            continue
        numbers = (u32, i32, f32, f16, bool_) if workgroup else (u32, i32, f32, f16)
        if not isinstance(inner, (Scalar, Vec)) or inner.scalar not in numbers:
            raise VerifyError(
                f"{what}: struct {st.name} member {name}: {ty} (u32, i32, f32 or f16 scalars, "
                "vectors of them, atomic<u32> or atomic<i32>, other structs, or fixed-size "
                "arrays of those, nested or not)"
            )


def check_memory_matrix(what: str, ty: Mat) -> None:
    """A matrix in storage or workgroup memory: ``f32`` or ``f16`` elements."""
    if ty.elem not in (f32, f16):
        raise VerifyError(f"{what}: {ty} (matrices in memory are of f32 or f16)")


def check_memory_array(what: str, ty: Array) -> None:
    """A fixed-size array a storage binding holds as its element (``array<array<f32, 4>>``) or
    whole (``array<array<u32, 8>, 16>``, ``array<B, 4>``, ``array<atomic<u32>, 4>``): u32, i32
    or f32 scalars, vectors of them, structs or atomics, under any nesting of fixed-size arrays."""
    inner = array_leaf(ty)
    if isinstance(inner, Struct):
        check_memory_struct(what, inner)
    elif isinstance(inner, Atomic) and inner.elem in (u32, i32):
        pass  # array<atomic<u32>, 4>: reached only by the atomic builtins
    elif isinstance(inner, Mat):
        check_memory_matrix(what, inner)
    elif not isinstance(inner, (Scalar, Vec)) or inner.scalar not in (u32, i32, f32, f16):
        raise VerifyError(
            f"{what}: {ty} (arrays of u32, i32, f32 or f16 scalars, vectors of them or structs, "
            "nested or not)"
        )


def uniform_type(ty: object) -> bool:
    """Whether the uniform holds ``ty``: u32, i32, f32 or f16 scalars, vectors and matrices,
    structs of those and fixed-size arrays of them, nested to any depth."""
    if isinstance(ty, Array):
        return uniform_type(ty.elem)
    if isinstance(ty, Struct):
        return bool(ty.fields) and all(uniform_type(t) for _, t in ty.fields)
    return isinstance(ty, (Scalar, Vec, Mat)) and ty.scalar != bool_


def workgroup_bytes(ty: Array) -> int:
    """Bytes ``ty`` takes in workgroup memory (WGSL's array stride: vec3 elements take 16)."""
    return 4 if isinstance(ty, Atomic) else size_of(ty)


def host_fits(b: ir.Binding) -> bool:
    """Whether ``b.data`` is a numeric scalar whose values tile ``b.elem`` (no vec3 padding)."""
    d, e = b.data, b.elem
    if not isinstance(d, Scalar) or d == bool_ or (isinstance(e, Vec) and e.n == 3):
        return False
    return e.scalar.size % d.size == 0
