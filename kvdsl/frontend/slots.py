"""Resources declared at one ``@group(g) @binding(b)``: WGSL takes them where the entry point
names at most one (its static use: a read, a write, ``arrayLength``, a texture builtin, in the
entry point or a helper it calls), and leaves the others out of the pipeline's layout; kvdsl
drops them from the kernel's interface, with the helpers the entry point does not call that name
them."""

from __future__ import annotations

from dataclasses import replace

from kvdsl.frontend.errors import WgslTypeError
from kvdsl.ir import tree as ir
from kvdsl.ir.uses import resources_named


def one_per_slot(
    kernel: ir.Kernel, shared: dict[tuple[int, int], list[str]], filename: str, lines: dict
) -> ir.Kernel:
    """``kernel`` without the resources of each slot of ``shared`` (slot -> the storage
    buffers, uniforms and textures declared at it, in order) but the one its entry point names
    (the first where it names none), and without the helpers it does not call that name a
    resource dropped (or call such a helper); Tint's refusal where it names two."""
    used, called = resources_named(kernel)
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
