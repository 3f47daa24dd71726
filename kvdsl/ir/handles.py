"""A kernel's helpers specialised to the storage textures they are passed, for naga: WGSL lets
a helper take a texture (``fn put(t: texture_storage_2d<r32uint, write>, ...)``), and naga (this
wgpu) refuses a ``textureStore`` through anything but a module-scope texture ("Not a global
variable"). :func:`specialise_textures` gives each helper one copy per tuple of module textures
it is passed, naming them directly, its texture parameters dropped; the GPU path emits that
kernel. The printed catalog, the interpreter and Tint keep the parameters."""

from __future__ import annotations

from dataclasses import fields, is_dataclass, replace

from kvdsl.ir import tree as ir
from kvdsl.ir.types import SampledTexture, StorageTexture


def _texture_params(fn: ir.Function) -> list[int]:
    return [
        i for i, (_, t) in enumerate(fn.params) if isinstance(t, (StorageTexture, SampledTexture))
    ]


def specialise_textures(kernel: ir.Kernel) -> ir.Kernel:
    """``kernel`` with no helper taking a storage texture (itself where none does)."""
    functions = {f.name: f for f in kernel.functions}
    if not any(_texture_params(f) for f in kernel.functions):
        return kernel
    taken = {x.name for x in ir.walk(kernel) if isinstance(getattr(x, "name", None), str)}
    taken |= {t.name for t in kernel.textures} | set(functions)
    out: list[ir.Function] = []
    made: dict[tuple[str, tuple[str, ...]], str] = {}

    def special(name: str, textures: tuple[str, ...]) -> str:
        key = (name, textures)
        if key not in made:
            fn = functions[name]
            new = "_".join((name, *textures))
            while new in taken:
                new += "_"
            taken.add(new)
            made[key] = new
            at = _texture_params(fn)
            env = {fn.params[i][0]: t for i, t in zip(at, textures)}
            body = rewrite(fn.body, env)
            params = tuple(p for i, p in enumerate(fn.params) if i not in at)
            out.append(ir.Function(new, params, fn.ret, body))
        return made[key]

    def rewrite(node, env: dict[str, str]):
        if type(node) is tuple:
            return tuple(rewrite(x, env) for x in node)
        if not is_dataclass(node) or isinstance(node, type) or type(node).__module__ != ir.__name__:
            return node
        match node:
            case ir.TextureStore(name, coords, value):
                return ir.TextureStore(
                    env.get(name, name), rewrite(coords, env), rewrite(value, env)
                )
            case ir.TextureDimensions(name):
                return ir.TextureDimensions(env.get(name, name))
            case ir.TextureLoad(name, coords, level):
                return ir.TextureLoad(
                    env.get(name, name), rewrite(coords, env), rewrite(level, env)
                )
            case ir.FnCall(name, args) if name in functions and _texture_params(functions[name]):
                at = _texture_params(functions[name])
                textures = tuple(env.get(args[i].name, args[i].name) for i in at)
                kept = tuple(rewrite(a, env) for i, a in enumerate(args) if i not in at)
                return ir.FnCall(special(name, textures), kept)
        changed = {f.name: rewrite(getattr(node, f.name), env) for f in fields(node)}
        if all(changed[k] is getattr(node, k) for k in changed):
            return node
        return replace(node, **changed)

    for fn in kernel.functions:
        if not _texture_params(fn):
            body = rewrite(fn.body, {})  # the specialised helpers it calls go first
            out.append(replace(fn, body=body))
    body = rewrite(kernel.body, {})
    return replace(kernel, functions=tuple(out), body=body)
