"""Resources the pipeline's layout leaves out: those an entry point does not name (its static
use: a read, a write, ``arrayLength``, a texture builtin, in the entry point or a helper it
calls). WGSL takes resources declared at one ``@group(g) @binding(b)`` where the entry point names
at most one (:func:`one_per_slot`), and a storage texture WebGPU binds on no device kvdsl asks for
where the entry point does not name it (:func:`bindable`); kvdsl drops the others from the
kernel's interface, with the helpers the entry point does not call that name them."""

from __future__ import annotations

from dataclasses import replace

from kvdsl.frontend.errors import WgslTypeError
from kvdsl.ir import tree as ir
from kvdsl.ir.types import READ_WRITE_FORMATS, TEXEL_FORMATS, StorageTexture
from kvdsl.ir.uses import resources_named

#: The texel formats WGSL names past :data:`~kvdsl.ir.types.TEXEL_FORMATS` (those WebGPU binds a
#: storage texture of on every device), each with the device feature WebGPU binds one under:
#: ``bgra8unorm-storage`` (``write``), ``texture-formats-tier1`` (``read``, ``write``; a
#: ``norm16`` format exists only under it). kvdsl's devices, and Tint's in
#: :func:`kvdsl.runtime.tint_check`, request neither.
FEATURE_FORMATS = {
    "bgra8unorm": "bgra8unorm-storage",
    **dict.fromkeys(
        (
            "r8unorm r8snorm r8uint r8sint rg8unorm rg8snorm rg8uint rg8sint r16unorm r16snorm "
            "r16uint r16sint r16float rg16unorm rg16snorm rg16uint rg16sint rg16float "
            "rgb10a2uint rgb10a2unorm rg11b10ufloat rgba16unorm rgba16snorm"
        ).split(),
        "texture-formats-tier1",
    ),
}


def unbindable(ty: StorageTexture) -> str | None:
    """Why WebGPU binds no storage texture of type ``ty`` on a device of no feature, in words
    (after "does not support storage texture access A"), else None."""
    if ty.format in FEATURE_FORMATS:
        return (
            f"WebGPU binds one only under the device feature {FEATURE_FORMATS[ty.format]}, "
            f"which kvdsl does not request; the formats it binds are {', '.join(TEXEL_FORMATS)}"
        )
    if ty.access == "read_write" and ty.format not in READ_WRITE_FORMATS:
        return f"WebGPU binds it only in {', '.join(READ_WRITE_FORMATS)}"
    return None


def bindable(kernel: ir.Kernel, filename: str, lines: dict) -> ir.Kernel:
    """``kernel`` without the storage textures WebGPU binds on no device kvdsl asks for
    (:func:`unbindable`) that its entry point does not name; Tint's refusal (Dawn's, making the
    pipeline) of one it names."""
    named = resources_named(kernel)[0]
    drop = set()
    for t in kernel.textures:
        why = unbindable(t.ty) if isinstance(t.ty, StorageTexture) else None
        if why is not None and t.name in named:
            raise WgslTypeError(
                f"texture '{t.name}': format {t.ty.format} does not support storage texture "
                f"access {t.ty.access} ({why})",
                filename,
                lines.get(t.name),
            )
        if why is not None:
            drop.add(t.name)
    return _without(kernel, drop) if drop else kernel


def one_per_slot(
    kernel: ir.Kernel, shared: dict[tuple[int, int], list[str]], filename: str, lines: dict
) -> ir.Kernel:
    """``kernel`` without the resources of each slot of ``shared`` (slot -> the storage
    buffers, uniforms and textures declared at it, in order) but the one its entry point names
    (the first where it names none), and without the helpers it does not call that name a
    resource dropped (or call such a helper); Tint's refusal where it names two."""
    used = resources_named(kernel)[0]
    drop = set()
    for (group, binding), names in shared.items():
        users = [n for n in names if n in used]
        if len(users) > 1:
            raise WgslTypeError(
                f"the entry point references multiple variables that use the same resource "
                f"binding '@group({group})', '@binding({binding})': '{users[0]}' and "
                f"'{users[1]}'",
                filename,
                lines.get(users[1]),
            )
        keep = users[0] if users else names[0]
        drop.update(n for n in names if n != keep)
    return _without(kernel, drop)


def _without(kernel: ir.Kernel, drop: set[str]) -> ir.Kernel:
    """``kernel`` without the resources ``drop`` names, and without the helpers its entry point
    does not call that name one of them (or call such a helper)."""
    called = resources_named(kernel)[1]
    uncalled = [f.name for f in kernel.functions if f.name not in called]
    gone = {f for f in uncalled if resources_named(kernel, f)[0] & drop}
    return replace(
        kernel,
        bindings=tuple(b for b in kernel.bindings if b.name not in drop),
        uniforms=tuple(u for u in kernel.uniforms if u.name not in drop),
        textures=tuple(t for t in kernel.textures if t.name not in drop),
        params=None if "params" in drop else kernel.params,
        functions=tuple(f for f in kernel.functions if f.name not in gone),
    )
