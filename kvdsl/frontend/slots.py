"""Storage buffers declared at one ``@group(g) @binding(b)``: WGSL takes them where the entry
point uses (reads or writes) at most one, and leaves the others out of the pipeline's layout;
kvdsl drops them from the kernel's interface."""

from __future__ import annotations

from dataclasses import replace

from kvdsl.frontend.errors import UnsupportedError, WgslTypeError
from kvdsl.ir import tree as ir
from kvdsl.ir.uses import bindings_touched


def one_per_slot(
    kernel: ir.Kernel, shared: dict[tuple[int, int], list[str]], filename: str, lines: dict
) -> ir.Kernel:
    """``kernel`` without the bindings of each slot of ``shared`` (slot -> the storage buffers
    declared at it, in order) but the one its entry point uses (the first where it uses none);
    Tint's refusal where it uses two; kvdsl's where one dropped is named anywhere else (a
    helper the entry point does not call, ``arrayLength``, a local of its name)."""
    used = bindings_touched(kernel)
    named = {n.name for n in ir.walk((kernel.body, kernel.functions)) if type(n) is ir.Name}
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
        for n in names:
            if n != keep and n in named:
                raise UnsupportedError(
                    f"'{n}' at @group({group}) @binding({binding}) beside '{keep}', named where "
                    "the entry point does not read or write it (kvdsl drops it from the "
                    "kernel)",
                    filename,
                    lines.get(n),
                )
        drop.update(n for n in names if n != keep)
    return replace(kernel, bindings=tuple(b for b in kernel.bindings if b.name not in drop))
