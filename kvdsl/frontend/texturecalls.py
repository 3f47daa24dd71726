"""WGSL's texture builtins as the typer reads them (:class:`TextureCalls`, a part of
:class:`kvdsl.frontend.typer.Typer`): each call of a texture of the subset picks its overload by
its arguments' count and its texture's kind, and becomes the IR's node (``TextureLoad``,
``TextureSampleLevel``, ``TextureSampleCompare`` ...), its abstract arguments typed as the
overload takes them; arguments of no overload are refused in Tint's words ("no matching call"),
and a builtin only a fragment shader may call, as Tint refuses it in a compute shader."""

from __future__ import annotations

from kvdsl.ir import tree as ir
from kvdsl.ir.scope import Scope
from kvdsl.ir.texels import texel_coords
from kvdsl.ir.types import SampledTexture, Sampler, StorageTexture, Vec, f32, i32

#: The texture builtins the IR holds: one of them given a texture of the subset with arguments
#: of no overload is WGSL's error (Tint: "no matching call"), not a construct outside the subset.
TEXTURE_CALLS = frozenset(
    (
        "textureDimensions",
        "textureLoad",
        "textureNumLayers",
        "textureNumSamples",
        "textureStore",
        "textureSampleLevel",
        "textureSampleCompareLevel",
        "textureGatherCompare",
        "textureGather",
        "textureSampleGrad",
        "textureSampleBaseClampToEdge",
        "textureNumLevels",
    )
)
#: The overloads of a ``texture_external`` (WGSL's): builtin and count of arguments.
EXTERNAL_CALLS = (("textureLoad", 2), ("textureDimensions", 1), ("textureSampleBaseClampToEdge", 3))
#: The sampling builtins WGSL allows in a fragment shader only (they take implicit derivatives):
#: Tint refuses each in a compute shader, whatever its texture.
FRAGMENT_ONLY = frozenset(("textureSample", "textureSampleBias", "textureSampleCompare"))


class TextureCalls:
    """The :class:`kvdsl.frontend.typer.Typer`'s texture builtins, over its ``expr``,
    ``type_of`` and ``error``."""

    def texture_call(self, e: ir.FnCall, scope: Scope) -> ir.Expr:
        """Texture builtin call ``e``, its first argument naming a texture (or sampler) of the
        subset."""
        name, args = e.name, e.args
        if name == "textureGather" and not self.texture(args[:1], 1, scope):
            return self.gather(e, scope)  # the channel first
        n, tex = len(args), scope.lookup(args[0].name).ty
        depth = isinstance(tex, SampledTexture) and tex.depth
        arrayed = isinstance(tex, SampledTexture) and tex.arrayed
        cube = isinstance(tex, SampledTexture) and tex.cube  # sampled only, in a direction
        towards = Vec(3, f32) if cube else texel_coords(getattr(tex, "dim", 2), f32)
        if getattr(tex, "multisampled", False) and (
            (name, n)
            not in (("textureLoad", 3), ("textureDimensions", 1), ("textureNumSamples", 1))
        ):
            self.no_overload(name, args, scope)  # read texel by texel, sample by sample
        if getattr(tex, "external", False) and (name, n) not in EXTERNAL_CALLS:
            self.no_overload(name, args, scope)  # no level, no layer, no store
        match name:
            case _ if name in FRAGMENT_ONLY:
                raise self.error(f"{name}: built-in cannot be used by compute pipeline stage")
            case "textureDimensions" if n == 1:
                return ir.TextureDimensions(args[0].name)
            case "textureDimensions" if n == 2:
                return ir.TextureDimensions(args[0].name, self.expr(args[1], scope, None))
            case "textureLoad" if n == 2 and (
                isinstance(tex, StorageTexture) or getattr(tex, "external", False)
            ):
                return ir.TextureLoad(args[0].name, self.expr(args[1], scope, None))
            case "textureLoad" if n == 3 and isinstance(tex, StorageTexture) and tex.arrayed:
                coords, layer = self.expr(args[1], scope, None), self.expr(args[2], scope, None)
                return ir.TextureLoad(args[0].name, coords, None, layer)
            case "textureLoad" if n == 3 and not cube:
                coords, level = self.expr(args[1], scope, None), self.expr(args[2], scope, None)
                return ir.TextureLoad(args[0].name, coords, level)
            case "textureLoad" if n == 4 and arrayed and not cube:
                coords, layer, level = (self.expr(a, scope, None) for a in args[1:])
                return ir.TextureLoad(args[0].name, coords, level, layer)
            case "textureNumLayers" if n == 1:
                return ir.TextureNumLayers(args[0].name)
            case "textureNumSamples" if n == 1:
                return ir.TextureNumSamples(args[0].name)
            case "textureNumLevels" if n == 1:
                return ir.TextureNumLevels(args[0].name)
            case "textureSampleBaseClampToEdge" if n == 3 and self.sampler(args[1], scope):
                coords = self.expr(args[2], scope, Vec(2, f32))
                return ir.TextureSampleBaseClampToEdge(args[0].name, args[1].name, coords)
            case "textureSampleLevel" if self.fits(args, 4 + arrayed, tex, scope):
                coords = self.expr(args[2], scope, towards)
                layer = self.expr(args[3], scope, None) if arrayed else None
                level = self.expr(args[3 + arrayed], scope, None if depth else f32)
                offset = self.offset(args, 4 + arrayed, tex, scope)
                name, sampler = args[0].name, args[1].name
                return ir.TextureSampleLevel(name, sampler, coords, level, layer, offset)
            case "textureSampleCompareLevel" | "textureGatherCompare" if depth and self.fits(
                args, 4 + arrayed, tex, scope
            ):
                coords = self.expr(args[2], scope, towards)
                layer = self.expr(args[3], scope, None) if arrayed else None
                ref = self.expr(args[3 + arrayed], scope, f32)
                gather, offset = name == "textureGatherCompare", self.offset(
                    args, 4 + arrayed, tex, scope
                )
                return ir.TextureSampleCompare(
                    args[0].name, args[1].name, coords, ref, layer, gather, offset
                )
            case "textureGather" if depth and self.fits(args, 3 + arrayed, tex, scope):
                coords = self.expr(args[2], scope, towards)
                layer = self.expr(args[3], scope, None) if arrayed else None
                offset = self.offset(args, 3 + arrayed, tex, scope)
                return ir.TextureGather(args[0].name, args[1].name, coords, None, layer, offset)
            case "textureSampleGrad" if self.fits(args, 5 + arrayed, tex, scope):
                coords = self.expr(args[2], scope, towards)
                layer = self.expr(args[3], scope, None) if arrayed else None
                ddx, ddy = (self.expr(a, scope, towards) for a in args[3 + arrayed : 5 + arrayed])
                offset = self.offset(args, 5 + arrayed, tex, scope)
                name, sampler = args[0].name, args[1].name
                return ir.TextureSampleGrad(name, sampler, coords, ddx, ddy, layer, offset)
        self.no_overload(name, args, scope)

    def gather(self, e: ir.FnCall, scope: Scope) -> ir.TextureGather:
        """``textureGather(component, t, s, coords[, array_index])`` of a texture of colour."""
        args = e.args
        tex = scope.lookup(args[1].name).ty
        arrayed = isinstance(tex, SampledTexture) and tex.arrayed
        cube = isinstance(tex, SampledTexture) and tex.cube  # sampled in a direction
        colour = isinstance(tex, SampledTexture) and not tex.depth and not tex.external
        if not colour or not self.fits(args[1:], 3 + arrayed, tex, scope):
            self.no_overload("textureGather", args, scope)
        towards = Vec(3 if cube else 2, f32)
        component, coords = self.expr(args[0], scope, None), self.expr(args[3], scope, towards)
        layer = self.expr(args[4], scope, None) if arrayed else None
        offset = self.offset(args[1:], 3 + arrayed, tex, scope)
        return ir.TextureGather(args[1].name, args[2].name, coords, component, layer, offset)

    def fits(self, args: tuple, n: int, tex, scope: Scope) -> bool:
        """Whether ``args`` of a sampling builtin (texture, sampler, ...) are its ``n``, or
        ``n`` and an offset where ``tex`` takes one (a 2-D or 3-D texture's, not a cube's)."""
        offsettable = isinstance(tex, SampledTexture) and not tex.cube and tex.dim > 1
        return len(args) in (n, n + offsettable) and self.sampler(args[1], scope)

    def offset(self, args: tuple, n: int, tex, scope: Scope) -> ir.Expr | None:
        """The offset of a sampling builtin of ``n`` arguments besides, its last, if given."""
        return self.expr(args[n], scope, texel_coords(tex.dim, i32)) if len(args) > n else None

    def no_overload(self, name: str, args: tuple, scope: Scope) -> None:
        """Refuse texture builtin ``name`` of ``args``, no overload of which fits (Tint's
        words), naming the textures and samplers among them by type."""
        given = []
        for a in args:
            sym = scope.lookup(a.name) if type(a) is ir.Name else None
            if sym is not None and sym.kind == "texture":
                given.append(str(sym.ty))
            else:
                given.append(str(self.type_of(self.expr(a, scope, None), scope)))
        raise self.error(f"no matching call to '{name}({', '.join(given)})'")

    def texture(self, args: tuple, n: int, scope: Scope) -> bool:
        """Whether ``args`` are ``n`` arguments of a texture builtin, the first a texture's (or
        sampler's) name (the call is refused as a WGSL builtin outside the subset otherwise)."""
        if len(args) != n or type(args[0]) is not ir.Name:
            return False
        sym = scope.lookup(args[0].name)
        return sym is not None and sym.kind == "texture"

    @staticmethod
    def sampler(arg: ir.Expr, scope: Scope) -> bool:
        """Whether ``arg`` names a sampler (``sampler`` or ``sampler_comparison``)."""
        sym = scope.lookup(arg.name) if type(arg) is ir.Name else None
        return sym is not None and sym.kind == "texture" and isinstance(sym.ty, Sampler)
