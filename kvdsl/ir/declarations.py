"""The module's declarations as the verifier checks them before any body: consts, bindings
and their types, the params and other uniforms, workgroup and private vars, overrides and the
entry point's builtins, declared into the module scope (:func:`module_scope`); and which structs a
``let`` or ``var`` may hold (:func:`value_struct`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvdsl.ir import tree as ir
from kvdsl.ir.memtypes import (
    check_memory_array,
    check_memory_matrix,
    check_memory_struct,
    host_fits,
    uniform_type,
    workgroup_bytes,
)
from kvdsl.ir.scope import Scope, Symbol, VerifyError, check_name
from kvdsl.ir.show import show
from kvdsl.ir.types import (
    SAMPLE_TYPES,
    TEXEL_FORMATS,
    Array,
    Atomic,
    Mat,
    RuntimeArray,
    HANDLES,
    SampledTexture,
    Scalar,
    StorageTexture,
    Struct,
    Type,
    Vec,
    array_leaf,
    bool_,
    f16,
    f32,
    holds_atomic,
    i32,
    u32,
)

if TYPE_CHECKING:
    from kvdsl.ir.verify import Verifier

MAX_WORKGROUP_BYTES = 16384  # WebGPU's default maxComputeWorkgroupStorageSize


def module_scope(kernel: ir.Kernel, verifier: Verifier) -> Scope:
    """The scope holding module consts, bindings, params and the entry point's builtins."""
    scope = Scope()
    verifier.module = scope
    for c in kernel.consts:
        if not isinstance(c.ty, (Scalar, Vec, Mat, Array)) and not value_struct(c.ty):
            raise VerifyError(
                f"const {c.name}: type {c.ty} is not a scalar, vector, matrix, array or struct"
            )
        got = verifier.type_of(c.value, scope)
        if got is not c.ty and got != c.ty:
            raise VerifyError(f"const {c.name}: value {show(c.value)} is {got}, declared {c.ty}")
        scope.declare(c.name, Symbol(c.ty, "const", "", c.value), c)
        if (c.ty is f32 or c.ty is f16) and not isinstance(c.value, ir.Lit):
            verifier.float_const(c.name, scope.visible[c.name])  # finite: checked now
    for b in kernel.bindings:
        if b.access not in ("read", "read_write"):
            raise VerifyError(f"binding '{b.name}': access '{b.access}' is not read or read_write")
        if isinstance(b.elem, Struct):
            check_memory_struct(f"binding '{b.name}'", b.elem, b.whole)
            if b.access != "read_write" and holds_atomic(b.elem):
                raise VerifyError(
                    f"binding '{b.name}': struct {b.elem.name} holds an atomic, and the binding "
                    f"is {b.access} (atomics in storage are read_write)"
                )
        elif isinstance(b.elem, Array):
            check_memory_array(f"binding '{b.name}'", b.elem)
            if b.access != "read_write" and holds_atomic(b.elem):
                raise VerifyError(
                    f"binding '{b.name}': {b.elem} holds an atomic, and the binding is "
                    f"{b.access} (atomics in storage are read_write)"
                )
        elif isinstance(b.elem, Atomic):
            if b.elem.elem not in (u32, i32) or b.access != "read_write" or b.data is not None:
                raise VerifyError(
                    f"binding '{b.name}': {b.elem} elements are atomic<u32> or atomic<i32> in a "
                    f"read_write binding (got {b.elem}, {b.access})"
                )
        elif isinstance(b.elem, Mat):
            check_memory_matrix(f"binding '{b.name}'", b.elem)
        elif not isinstance(b.elem, (Scalar, Vec)) or b.elem == bool_:
            raise VerifyError(f"binding '{b.name}': element type {b.elem} cannot be stored")
        if b.data is not None and not host_fits(b):
            raise VerifyError(
                f"binding '{b.name}': host data {b.data} does not tile element type {b.elem}"
            )
        ty = b.elem if b.whole else RuntimeArray(b.elem)
        scope.declare(b.name, Symbol(ty, "binding", b.access), b)
    if kernel.params is not None:
        for fname, fty in kernel.params.fields:
            check_name(fname, kernel.params)
            if not uniform_type(fty):
                raise VerifyError(f"params field '{fname}': type {fty} cannot be uniform")
        scope.declare("params", Symbol(kernel.params, "params"), kernel.params)
    for u in kernel.uniforms:
        if not isinstance(u, ir.Uniform) or not uniform_type(u.ty):
            raise VerifyError(f"uniform {u!r}: the uniform holds no such type")
        check_name(u.name, u)
        scope.declare(u.name, Symbol(u.ty, "uniform"), u)
    total = 0
    for w in kernel.workgroup_vars:
        if isinstance(w, ir.WorkgroupVar) and isinstance(w.ty, Atomic):  # one atomic counter
            if w.ty.elem not in (u32, i32):
                raise VerifyError(f"workgroup var '{w.name}': {w.ty} is not atomic<u32> or i32")
            total += 4
            scope.declare(w.name, Symbol(w.ty, "workgroup"), w)
            continue
        if not isinstance(w, ir.WorkgroupVar):
            raise VerifyError(f"workgroup var {w!r} is not a WorkgroupVar")
        _check_workgroup_type(w)
        total += workgroup_bytes(w.ty)
        if total > MAX_WORKGROUP_BYTES:
            raise VerifyError(
                f"workgroup var '{w.name}': {w.ty} brings workgroup memory to {total} bytes, "
                f"more than {MAX_WORKGROUP_BYTES}"
            )
        scope.declare(w.name, Symbol(w.ty, "workgroup"), w)
    for t in kernel.textures:
        if not isinstance(t, ir.Texture) or not isinstance(t.ty, HANDLES):
            raise VerifyError(f"texture {t!r} is not a Texture of a texture type")
        if isinstance(t.ty, SampledTexture):
            if t.ty.sample.name not in SAMPLE_TYPES:
                raise VerifyError(f"texture '{t.name}': {t.ty} (sample types f32, u32, i32)")
            if t.ty.external and t.ty != SampledTexture(f32, external=True):
                raise VerifyError(f"texture '{t.name}': a texture_external is 2-D, of f32 alone")
        elif isinstance(t.ty, StorageTexture) and (
            t.ty.format not in TEXEL_FORMATS or t.ty.access not in ("write", "read", "read_write")
        ):
            raise VerifyError(f"texture '{t.name}': {t.ty} (formats {', '.join(TEXEL_FORMATS)})")
        check_name(t.name, t)
        scope.declare(t.name, Symbol(t.ty, "texture"), t)
    for v in kernel.private_vars:
        check_private_var(v, verifier, scope)
        scope.declare(v.name, Symbol(v.ty, "private"), v)
    for a in kernel.asserts:
        verifier.const_assert(a, scope)
    return scope


def _check_workgroup_type(w: ir.WorkgroupVar) -> None:
    """Refuse a workgroup var (not one atomic counter) of a type workgroup memory does not
    hold: one scalar, vector, matrix or struct, or an array of scalars, vectors or atomics, or
    of arrays of them; structs and matrices (alone or as an array's leaf) are held as words."""
    what = f"workgroup var '{w.name}'"
    whole = not isinstance(w.ty, Array)
    leaf = w.ty if whole else array_leaf(w.ty.elem)  # arrays three levels deep or more
    if isinstance(leaf, Struct):  # B, array<B, 4>, array<array<B, 2>, 4>
        check_memory_struct(what, leaf, workgroup=True)
        leaf = u32  # held as words
    elif isinstance(leaf, Mat):  # mat2x2<f32>, array<mat2x2<f32>, 64>
        check_memory_matrix(what, leaf)
        leaf = u32  # held as words
    if whole:
        if not isinstance(leaf, (Scalar, Vec)):
            raise VerifyError(
                f"{what}: type {w.ty} is not a scalar, vector, matrix, struct, atomic or array"
            )
        return
    atomic = isinstance(leaf, Atomic) and leaf.elem in (u32, i32)
    if not (atomic or isinstance(leaf, (Scalar, Vec))) or not isinstance(w.ty.n, int) or w.ty.n < 1:
        raise VerifyError(
            f"{what}: type {w.ty} is not an array of scalars, vectors or atomics, or of arrays "
            "of them"
        )


def check_private_var(v: ir.PrivateVar, verifier: Verifier, scope: Scope) -> None:
    """A ``var<private>``: of a type a var holds (a scalar, vector, matrix, fixed-size array or
    struct, no atomic), its initialiser, if any, a const-expression of that type."""
    if not isinstance(v, ir.PrivateVar):
        raise VerifyError(f"private var {v!r} is not a PrivateVar")
    check_name(v.name, v)
    if not isinstance(v.ty, (Scalar, Vec, Mat, Array, Struct)) or holds_atomic(v.ty):
        raise VerifyError(f"var<private> {v.name}: type {v.ty} (a private var holds no atomic)")
    if v.init is None:
        return
    got = verifier.type_of(v.init, scope)
    if got != v.ty:
        raise VerifyError(f"var<private> {v.name}: initialiser is {got}, expected {v.ty}")
    for x in ir.walk(v.init):
        sym = scope.visible.get(x.name) if type(x) is ir.Name else None
        if type(x) is ir.FnCall or (type(x) is ir.Name and (sym is None or sym.kind != "const")):
            raise VerifyError(
                f"var<private> {v.name}: initialiser {show(v.init)} is not a const-expression "
                f"(it reads {show(x)})"
            )


def value_struct(ty: Type) -> bool:
    """Whether ``ty`` is a struct a ``let`` or ``var`` may hold (read whole from an array of
    structs in memory, ``let b = blocks[i];``, or built, ``S(a, b)``): one with no runtime-sized
    array and no atomic member, not the params block's or a builtin's result."""
    return (
        isinstance(ty, Struct)
        and not ty.name.startswith("__")
        and not any(isinstance(t, RuntimeArray) or holds_atomic(t) for _, t in ty.fields)
    )
