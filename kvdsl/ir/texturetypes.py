"""The typing of the texture builtins (``textureDimensions``, ``textureLoad``,
``textureNumLayers``, ``textureSampleLevel``, ``textureSampleCompareLevel``,
``textureGatherCompare``, ``textureSampleBaseClampToEdge`` ...) against WGSL's overloads: a mixin of
:class:`~kvdsl.ir.typeof.ExprTyper`, whose ``type_of`` types their arguments."""

from __future__ import annotations

from kvdsl.ir import tree as ir
from kvdsl.ir.consteval import const_shaped
from kvdsl.ir.scope import Scope, VerifyError
from kvdsl.ir.show import show
from kvdsl.ir.types import (
    SampledTexture,
    Sampler,
    StorageTexture,
    Type,
    Vec,
    f32,
    i32,
    u32,
)
from kvdsl.ir.texels import texel_coords


class TextureTyper:
    """The texture builtins' types, of :class:`~kvdsl.ir.typeof.ExprTyper`."""

    def texture_expr(self, e: ir.Expr, scope: Scope) -> Type:
        """The type of texture builtin ``e``, or the :class:`VerifyError` of WGSL's refusal."""
        match e:
            case ir.TextureDimensions(name, level):
                tex = self.texture_type(e, name, scope)
                if level is not None:
                    if not isinstance(tex, SampledTexture) or tex.multisampled or tex.external:
                        raise VerifyError(
                            f"{show(e)}: '{name}' is a {tex}, which has no mip levels (a "
                            "level is given for a texture_2d or texture_3d)"
                        )
                    self._mip_level(e, level, scope)
                return texel_coords(tex.dim, u32)
            case ir.TextureLoad(name, coords, None) if self._external(e, name, scope):
                which = "textureLoad without a level does not read"
                return self.texel_access(e, name, coords, scope, SampledTexture, which).texel
            case ir.TextureLoad(name, coords, None):
                which = (
                    "textureLoad without a level does not read (a storage texture of read or "
                    "read_write access)"
                )
                tex = self.texel_access(e, name, coords, scope, StorageTexture, which)
                if tex.access == "write":
                    raise VerifyError(f"{show(e)}: '{name}' is a {tex}, which {which}")
                self._layer(e, tex, e.layer, scope)
                return tex.texel
            case ir.TextureLoad(name, coords, level):
                which = "textureLoad does not read (a texture_2d or texture_3d)"
                tex = self.texel_access(e, name, coords, scope, SampledTexture, which)
                if tex.cube or tex.external:
                    raise VerifyError(f"{show(e)}: '{name}' is a {tex}, which {which}")
                self._mip_level(e, level, scope)
                self._layer(e, tex, e.layer, scope)
                return tex.texel
            case ir.TextureNumSamples(name):
                tex = self.texture_type(e, name, scope)
                if not getattr(tex, "multisampled", False):
                    raise VerifyError(f"{show(e)}: '{name}' is a {tex}, which is not multisampled")
                return u32
            case ir.TextureNumLayers(name):
                tex = self.texture_type(e, name, scope)
                if not getattr(tex, "arrayed", False):
                    raise VerifyError(f"{show(e)}: '{name}' is a {tex}, which has no layers")
                return u32
            case ir.TextureSampleLevel(name, sampler, coords, level):
                tex = self.texture_type(e, name, scope)
                if not isinstance(tex, SampledTexture) or tex.sample != f32 or tex.external:
                    raise VerifyError(
                        f"{show(e)}: '{name}' is a {tex}, which textureSampleLevel does not "
                        "sample (a texture_1d<f32>, texture_2d<f32> or texture_3d<f32>)"
                    )
                self._sampler(e, sampler, False, scope)
                self._sample_coords(e, tex, coords, scope)
                if tex.depth:  # a depth texture's level is a whole number, as its loads'
                    self._mip_level(e, level, scope)
                elif (lt := self.type_of(level, scope)) is not f32:
                    raise VerifyError(f"{show(e)}: the level is {lt}, expected f32")
                self._layer(e, tex, e.layer, scope)
                self._offset(e, tex, e.offset, scope)
                return tex.texel
            case ir.TextureSampleBaseClampToEdge(name, sampler, coords):
                tex = self.texture_type(e, name, scope)
                plain = isinstance(tex, SampledTexture) and tex.sample == f32 and tex.dim == 2
                if not plain or tex.depth or tex.arrayed or tex.cube or tex.multisampled:
                    raise VerifyError(
                        f"{show(e)}: '{name}' is a {tex}, which textureSampleBaseClampToEdge "
                        "does not sample (a texture_2d<f32> or texture_external)"
                    )
                self._sampler(e, sampler, False, scope)
                self._sample_coords(e, tex, coords, scope)
                return Vec(4, f32)
            case ir.TextureNumLevels(name):
                tex = self.texture_type(e, name, scope)
                if not isinstance(tex, SampledTexture) or tex.multisampled or tex.external:
                    raise VerifyError(f"{show(e)}: '{name}' is a {tex}, which has no mip levels")
                return u32
            case ir.TextureSampleCompare(name, sampler, coords, ref, layer, gather):
                tex = self.texture_type(e, name, scope)
                if not isinstance(tex, SampledTexture) or not tex.depth:
                    raise VerifyError(
                        f"{show(e)}: '{name}' is a {tex}, which {show(e).split('(')[0]} does "
                        "not sample (a texture_depth_2d or texture_depth_2d_array)"
                    )
                self._sampler(e, sampler, True, scope)
                self._sample_coords(e, tex, coords, scope)
                if (rt := self.type_of(ref, scope)) is not f32:
                    raise VerifyError(f"{show(e)}: the depth reference is {rt}, expected f32")
                self._layer(e, tex, layer, scope)
                self._offset(e, tex, e.offset, scope)
                return Vec(4, f32) if gather else f32
            case ir.TextureGather(name, sampler, coords, component, layer):
                tex = self.texture_type(e, name, scope)
                if not isinstance(tex, SampledTexture) or tex.dim != 2 or tex.external:
                    raise VerifyError(
                        f"{show(e)}: '{name}' is a {tex}, which textureGather does not gather "
                        "(a 2-D texture or cube, arrayed or not, of colour or depth)"
                    )
                self._sampler(e, sampler, False, scope)
                self._sample_coords(e, tex, coords, scope)
                self._component(e, tex, component, scope)
                self._layer(e, tex, layer, scope)
                self._offset(e, tex, e.offset, scope)
                return Vec(4, tex.sample)
            case ir.TextureSampleGrad(name, sampler, coords, ddx, ddy, layer):
                tex = self.texture_type(e, name, scope)
                if (
                    not isinstance(tex, SampledTexture)
                    or tex.sample != f32
                    or tex.depth
                    or tex.external
                ):
                    raise VerifyError(
                        f"{show(e)}: '{name}' is a {tex}, which textureSampleGrad does not "
                        "sample (a texture_2d<f32>, texture_3d<f32> or cube of f32)"
                    )
                if tex.dim == 1:
                    raise VerifyError(f"{show(e)}: '{name}' is a {tex}, which has no gradients")
                self._sampler(e, sampler, False, scope)
                ct = self._sample_coords(e, tex, coords, scope)
                for grad in (ddx, ddy):
                    if (gt := self.type_of(grad, scope)) != ct:
                        raise VerifyError(f"{show(e)}: a gradient is {gt}, expected {ct}")
                self._layer(e, tex, layer, scope)
                self._offset(e, tex, e.offset, scope)
                return Vec(4, f32)
        raise VerifyError(f"not a texture builtin: {e!r}")

    def _offset(
        self, e: ir.Expr, tex: SampledTexture, offset: ir.Expr | None, scope: Scope
    ) -> None:
        """A sampling builtin's texel ``offset``: a ``vecN<i32>`` of the texture's N dimensions
        (none of a cube or a 1-D texture), a const-expression, each component of a literal
        one -8 to 7 (Tint's words)."""
        if offset is None:
            return
        call = show(e).split("(")[0]
        want = texel_coords(tex.dim, i32)
        if tex.cube or tex.dim == 1 or (ot := self.type_of(offset, scope)) != want:
            raise VerifyError(f"{show(e)}: '{tex}' takes no offset of this type")
        if not const_shaped(offset, scope.visible):
            raise VerifyError(
                f"{show(e)}: the 'offset' argument of '{call}' must be a const-expression"
            )
        parts = offset.args if isinstance(offset, ir.Construct) else ()
        values = [a.value for a in parts if isinstance(a, ir.Lit)]
        values = values if len(values) == len(parts) else []  # of literals alone
        for k, v in enumerate(values * (ot.n if len(values) == 1 else 1)):
            if not -8 <= v <= 7:
                raise VerifyError(
                    f"{show(e)}: each component of the offset argument must be at least -8 "
                    f"and at most 7. offset component {k} is {v}"
                )

    def _component(
        self, e: ir.Expr, tex: SampledTexture, component: ir.Expr | None, scope: Scope
    ) -> None:
        """``textureGather``'s channel ``component``: none of a depth texture; else an ``i32``
        or ``u32`` const-expression, a literal of one 0 to 3 (Tint's words)."""
        if (component is None) != tex.depth:
            what = "no component" if component is None else "a component"
            raise VerifyError(f"{show(e)}: '{tex}' is given {what}")
        if component is None:
            return
        if (ct := self.type_of(component, scope)) not in (i32, u32):
            raise VerifyError(f"{show(e)}: the component is {ct}, expected i32 or u32")
        if not const_shaped(component, scope.visible):
            raise VerifyError(
                f"{show(e)}: the 'component' argument of 'textureGather' must be a "
                "const-expression"
            )
        if isinstance(component, ir.Lit) and not 0 <= component.value <= 3:
            raise VerifyError(
                f"{show(e)}: the component argument must be at least 0 and at most 3. "
                f"component is {component.value}"
            )

    def _sampler(self, e: ir.Expr, sampler: str, comparison: bool, scope: Scope) -> None:
        """Sampler ``sampler`` of sampling builtin ``e`` is a ``sampler`` (a
        ``sampler_comparison`` where ``comparison``)."""
        ty = self.texture_type(e, sampler, scope)
        if not isinstance(ty, Sampler) or ty.comparison != comparison:
            raise VerifyError(f"{show(e)}: '{sampler}' is not a {Sampler(comparison)}")

    def _sample_coords(
        self, e: ir.Expr, tex: SampledTexture, coords: ir.Expr, scope: Scope
    ) -> Type:
        """Sampling builtin ``e``'s ``coords`` are floats of ``tex``'s dimensions (their
        type)."""
        ct = self.type_of(coords, scope)
        want = Vec(3, f32) if tex.cube else texel_coords(tex.dim, f32)  # a cube's: a direction
        if ct != want:
            raise VerifyError(f"{show(e)}: the coordinates are {ct}, expected {want}")
        return ct

    def _layer(
        self, e: object, tex: SampledTexture | StorageTexture, layer: object, scope: Scope
    ) -> None:
        """An arrayed texture's layer index is given, an ``i32`` or ``u32``; no other
        texture's is."""
        if (layer is None) == tex.arrayed:
            what = "no array index" if layer is None else "an array index"
            raise VerifyError(f"{show(e)}: '{tex}' is given {what}")
        lt = None if layer is None else self.type_of(layer, scope)
        if lt is not None and lt is not i32 and lt is not u32:
            raise VerifyError(f"{show(e)}: the array index is {lt}, expected i32 or u32")

    def _external(self, node: object, name: str, scope: Scope) -> bool:
        """Whether texture ``name`` a texture builtin ``node`` names is a ``texture_external``."""
        return getattr(self.texture_type(node, name, scope), "external", False)

    def texture_type(
        self, node: object, name: str, scope: Scope
    ) -> StorageTexture | SampledTexture | Sampler:
        """The type of texture (or sampler) ``name`` a texture builtin ``node`` names."""
        sym = scope.lookup(name)
        if sym is None or sym.kind != "texture":
            what = "sampler" if name == getattr(node, "sampler", None) else "texture"
            raise VerifyError(f"{show(node)}: '{name}' is not a {what}")
        return sym.ty

    def texel_access(
        self,
        node: object,
        name: str,
        coords: ir.Expr,
        scope: Scope,
        kind: type[StorageTexture] | type[SampledTexture],
        which: str,
    ) -> StorageTexture | SampledTexture:
        """The type of texture ``name`` that a texel builtin ``node`` (``textureLoad``,
        ``textureStore``) reaches at ``coords``: a ``kind`` texture (``which``: the refusal of
        another, in words) at integer coordinates of its dimensions (``vec2<i32>`` or
        ``vec2<u32>`` for a 2D one)."""
        tex = self.texture_type(node, name, scope)
        if not isinstance(tex, kind):
            raise VerifyError(f"{show(node)}: '{name}' is a {tex}, which {which}")
        ct = self.type_of(coords, scope)
        want = (texel_coords(tex.dim, i32), texel_coords(tex.dim, u32))
        if ct not in want:
            raise VerifyError(
                f"{show(node)}: the coordinates are {ct}, expected {want[0]} or {want[1]}"
            )
        return tex

    def _mip_level(self, e: ir.Expr, level: ir.Expr, scope: Scope) -> None:
        """Refuse a mip ``level`` of texture builtin ``e`` that is not an i32 or u32."""
        lt = self.type_of(level, scope)
        if lt is not i32 and lt is not u32:
            raise VerifyError(f"{show(e)}: the level is {lt}, expected i32 or u32")
