"""A kernel's helpers specialised to the textures and uniforms they are passed, for naga: WGSL
lets a helper take a texture (``fn put(t: texture_storage_2d<r32uint, write>, ...)``) or a
pointer into uniform memory (``fn f(p: ptr<uniform, P>)``), and naga (this wgpu) refuses a
``textureStore`` through anything but a module-scope texture ("Not a global variable") and a
uniform pointer parameter. :func:`specialise_handles` gives each such helper one copy per tuple
of module textures and uniforms it is passed (``&params``, ``&taps``: a whole uniform), naming
them directly, those parameters dropped; a uniform pointer argument of another form
(``&taps[i]``) keeps its parameter. The GPU path emits that kernel. The printed catalog, the
interpreter and Tint keep the parameters."""

from __future__ import annotations

from dataclasses import fields, is_dataclass, replace

from kvdsl.ir import tree as ir
from kvdsl.ir.types import Ptr, SampledTexture, Sampler, StorageTexture

TEXTURES = (StorageTexture, SampledTexture, Sampler)
#: The IR's texture builtins, each naming a texture (and a sampler, of the sampling ones).
TEXTURE_NODES = (
    ir.TextureStore,
    ir.TextureDimensions,
    ir.TextureLoad,
    ir.TextureNumLayers,
    ir.TextureNumSamples,
    ir.TextureNumLevels,
    ir.TextureSampleLevel,
    ir.TextureSampleBaseClampToEdge,
    ir.TextureSampleCompare,
    ir.TextureGather,
    ir.TextureSampleGrad,
)
_NAMES = {
    node: ("name", "sampler") if "sampler" in node.__dataclass_fields__ else ("name",)
    for node in TEXTURE_NODES
}


def _handle_params(fn: ir.Function) -> list[int]:
    """The parameters of ``fn`` a copy may drop: textures, and pointers into uniform memory
    whose name no declaration of the body takes again."""
    local = {x.name for x in ir.walk(fn.body) if type(x) in (ir.Let, ir.Var)}
    return [
        i
        for i, (p, t) in enumerate(fn.params)
        if isinstance(t, TEXTURES) or isinstance(t, Ptr) and t.space == "uniform" and p not in local
    ]


def specialise_handles(kernel: ir.Kernel) -> ir.Kernel:
    """``kernel`` with no helper taking a texture, nor a pointer to a whole uniform (itself
    where none does)."""
    functions = {f.name: f for f in kernel.functions}
    if not any(_handle_params(f) for f in kernel.functions):
        return kernel
    uniforms = {u.name for u in kernel.uniforms} | ({"params"} if kernel.params else set())
    taken = {x.name for x in ir.walk(kernel) if isinstance(getattr(x, "name", None), str)}
    taken |= {t.name for t in kernel.textures} | set(functions) | uniforms
    out: list[ir.Function] = []
    made: dict[tuple[str, tuple], str] = {}

    def special(name: str, given: tuple) -> str:
        """The copy of helper ``name`` for ``given`` (per handle parameter: the module texture
        or uniform it names, or None where it stays a parameter)."""
        key = (name, given)
        if key not in made:
            fn = functions[name]
            new = "_".join((name, *(g for g in given if g is not None)))
            while new in taken and new != name:  # a copy dropping nothing keeps its name
                new += "_"
            taken.add(new)
            made[key] = new
            at = _handle_params(fn)
            env: dict[str, object] = {}
            for i, g in zip(at, given):
                if g is not None:
                    p, t = fn.params[i]
                    env[p] = g if isinstance(t, TEXTURES) else ir.AddressOf(ir.Name(g))
            body = rewrite(fn.body, env)
            params = tuple(p for p in fn.params if p[0] not in env)
            out.append(ir.Function(new, params, fn.ret, body))
        return made[key]

    def given_of(fn: ir.Function, args: tuple, env: dict) -> tuple:
        out = []
        for i in _handle_params(fn):
            a = rewrite(args[i], env)
            if isinstance(fn.params[i][1], TEXTURES):
                out.append(env.get(a.name, a.name))  # a module texture, or the one passed
            elif type(a) is ir.AddressOf and type(a.x) is ir.Name and a.x.name in uniforms:
                out.append(a.x.name)
            else:
                out.append(None)
        return tuple(out)

    def rewrite(node, env: dict):
        if type(node) is tuple:
            return tuple(rewrite(x, env) for x in node)
        if not is_dataclass(node) or isinstance(node, type) or type(node).__module__ != ir.__name__:
            return node
        match node:
            case ir.Name(name) if isinstance(env.get(name), ir.AddressOf):
                return env[name]
            case ir.Deref(x):
                x = rewrite(x, env)
                return x.x if type(x) is ir.AddressOf else ir.Deref(x)
            case _ if isinstance(node, TEXTURE_NODES):
                # The texture (and sampler) named: the module's the parameter stands for.
                named = {k: env.get(getattr(node, k), getattr(node, k)) for k in _NAMES[type(node)]}
                changed = {
                    f.name: rewrite(getattr(node, f.name), env)
                    for f in fields(node)
                    if f.name not in named
                }
                return replace(node, **named, **changed)
            case ir.FnCall(name, args) if name in functions and _handle_params(functions[name]):
                fn = functions[name]
                given = given_of(fn, args, env)
                dropped = {i for i, g in zip(_handle_params(fn), given) if g is not None}
                kept = tuple(rewrite(a, env) for i, a in enumerate(args) if i not in dropped)
                return ir.FnCall(special(name, given), kept)
        changed = {f.name: rewrite(getattr(node, f.name), env) for f in fields(node)}
        if all(changed[k] is getattr(node, k) for k in changed):
            return node
        return replace(node, **changed)

    for fn in kernel.functions:
        if not _handle_params(fn):
            body = rewrite(fn.body, {})  # the specialised helpers it calls go first
            out.append(replace(fn, body=body))
    body = rewrite(kernel.body, {})
    return replace(kernel, functions=tuple(out), body=body)
