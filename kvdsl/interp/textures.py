"""Texture access in the interpreter: ``textureLoad`` of a sampled texture (1-D, 2-D, 3-D,
arrayed, depth, multisampled or external) and of a ``read`` or ``read_write`` storage texture,
``textureSampleLevel`` through the default sampler, ``textureSampleCompareLevel`` and ``textureGatherCompare`` through
the default sampler comparing by "less" (:data:`kvdsl.ir.types.COMPARE`), ``textureGather``,
``textureSampleGrad`` (of the one level), and ``textureStore`` of a ``write`` or ``read_write`` storage texture, with WGSL's bounds (a
texel outside the texture, a level other than 0: :class:`~kvdsl.interp.errors.OutOfBounds`)
and the races of two invocations storing one texel, or one reading a texel another stores, that
no ``textureBarrier()`` of their workgroup orders; a mixin of
:class:`kvdsl.interp.memory.Memory`, whose bounds reports it uses."""

from __future__ import annotations

import numpy as np

from kvdsl.interp.cubes import cube_footprint, cube_texel
from kvdsl.interp.buffers import TextureMemory, from_texels, to_texels, unrepresentable
from kvdsl.interp.errors import InterpError, OutOfBounds, RaceError
from kvdsl.interp.values import Mask, broadcast
from kvdsl.ir import tree as ir
from kvdsl.ir.show import show


class TextureAccess:
    """The texture loads and stores of :class:`kvdsl.interp.memory.Memory`."""

    def texture_expr(self, e: ir.Expr, m: Mask) -> np.ndarray:
        """The value of texture builtin ``e`` in each lane of mask ``m``: the texels of a
        depth texture are ``f32`` scalars (``[lanes]``), the others' ``vec4`` (``[lanes,
        4]``)."""
        match e:
            case ir.TextureDimensions(name, level):
                t = self.texture_of(name)
                if level is not None:
                    self.texture_level(t, self.eval(level, m), m)
                size = t.data.shape[-2::-1][: getattr(t.texture.ty, "dim", 2)]  # no layers
                return np.array(size if len(size) == 1 else [size], np.uint32)
            case ir.TextureNumLayers(name) | ir.TextureNumSamples(name):
                return np.array([self.texture_of(name).data.shape[0]], np.uint32)
            case ir.TextureLoad(name, coords, None, None) if getattr(
                self.texture_of(name).texture.ty, "external", False
            ):  # an external texture's: no level, the one there is
                t = self.texture_of(name)
                return self.texture_load(t, self.eval(coords, m), np.zeros(1, np.int64), m)
            case ir.TextureLoad(name, coords, None, layer):  # a storage texture's
                t = self.texture_of(name)
                return self.storage_texture_load(t, self.texel_at(coords, layer, m), m)
            case ir.TextureLoad(name, coords, level, layer):
                t, xyz = self.texture_of(name), self.eval(coords, m)
                if getattr(t.texture.ty, "multisampled", False):  # the sample: outermost
                    xyz = _with_layer(xyz, self.eval(level, m), self.n)
                    return _returned(t, self.texture_load(t, xyz, np.zeros(1, np.int64), m))
                if layer is not None:
                    xyz = _with_layer(xyz, self.eval(layer, m), self.n)
                return _returned(t, self.texture_load(t, xyz, self.eval(level, m), m))
            case ir.TextureSampleLevel(name, _, coords, level, layer, offset):
                self.eval(level, m)  # one level: every level samples it
                t = self.texture_of(name)
                at = self.eval(coords, m), self.index(t, layer, m), self.texel_offset(offset, m)
                return _returned(t, self.texture_sample(t, *at))
            case ir.TextureSampleBaseClampToEdge(name, _, coords):
                # Half a texel inside the edge: the texel the edge's clamp takes, of nearest.
                t = self.texture_of(name)
                return self.texture_sample(t, self.eval(coords, m))
            case ir.TextureSampleCompare(name, _, coords, ref, layer, gather, offset):
                t = self.texture_of(name)
                at = self.eval(coords, m), self.index(t, layer, m), self.texel_offset(offset, m)
                ref = broadcast(self.eval(ref, m), self.n).reshape(self.n, 1)
                texels = (
                    self.texture_gather(t, *at, 0, m) if gather else self.texture_sample(t, *at)
                )
                # The compare function "less": the reference passes where below the texel.
                passed = (ref < texels).astype(np.float32)
                return passed if gather else passed.reshape(self.n)
            case ir.TextureGather(name, _, coords, component, layer, offset):
                t = self.texture_of(name)
                at = self.eval(coords, m), self.index(t, layer, m), self.texel_offset(offset, m)
                channel = 0 if component is None else int(self.eval(component, m).reshape(-1)[0])
                return self.texture_gather(t, *at, channel, m)
            case ir.TextureSampleGrad(name, _, coords, ddx, ddy, layer, offset):
                self.eval(ddx, m), self.eval(ddy, m)  # one level: every gradient samples it
                t = self.texture_of(name)
                at = self.eval(coords, m), self.index(t, layer, m), self.texel_offset(offset, m)
                return self.texture_sample(t, *at)
            case ir.TextureNumLevels(name):
                return np.array([1], np.uint32)  # the one level each texture holds
        raise InterpError(f"{show(e)}: not a texture builtin")

    def texel_at(self, coords: ir.Expr, layer: ir.Expr | None, m: Mask) -> np.ndarray:
        """A texel access's ``coords`` in each lane, and its array index ``layer`` after them
        where given (x, y, layer: the layer the outermost axis of an arrayed texture)."""
        xyz = self.eval(coords, m)
        return xyz if layer is None else _with_layer(xyz, self.eval(layer, m), self.n)

    def texel_offset(self, offset: ir.Expr | None, m: Mask) -> np.ndarray | None:
        """A sampling builtin's texel ``offset`` (x[, y[, z]]) as ``[lanes, N]`` integers, or
        None where it has none."""
        if offset is None:
            return None
        return broadcast(self.eval(offset, m), self.n).astype(np.int64).reshape(self.n, -1)

    def index(self, t: TextureMemory, layer: ir.Expr | None, m: Mask) -> np.ndarray | None:
        """The array index ``layer`` of a sampling builtin in each lane, clamped to the layers
        of ``t``, as WGSL's sampling builtins take it (None where ``t`` has no layers)."""
        if layer is None:
            return None
        last = t.data.shape[0] - 1
        return np.clip(broadcast(self.eval(layer, m), self.n).astype(np.int64), 0, last)

    def texture_load(
        self, t: TextureMemory, coords: np.ndarray, level: np.ndarray, m: Mask
    ) -> np.ndarray:
        """``textureLoad``: each lane's texel ``coords`` (x, y, and z of a ``texture_3d`` or the
        array index of a ``texture_2d_array``) of
        mip level ``level``, a ``vec4`` (``[lanes, 4]``; lanes off the mask read texel 0); an
        active lane's texel outside the texture, or a level other than 0 (the texture has one),
        is :class:`OutOfBounds` (WGSL leaves what such a load returns to the implementation)."""
        name = t.texture.name
        lanes = self.grid.active(m)
        size = t.data.shape[-2::-1]  # width, height[, depth]
        xyz = broadcast(coords, self.n).astype(np.int64).reshape(self.n, -1)  # 1-D: [n, 1]
        lv = broadcast(level, self.n).astype(np.int64).reshape(-1)
        bad = lv != 0
        for k, n in enumerate(size):
            bad |= (xyz[:, k] < 0) | (xyz[:, k] >= n)
        if bad[lanes].any():
            j = int(lanes[np.flatnonzero(bad[lanes])[0]])
            texel = ", ".join(str(c) for c in xyz[j])
            what = f"level {lv[j]}" if lv[j] != 0 else f"texel ({texel})"
            who = self.grid.describe(int(self.grid.original(np.array([j]))[0]))
            third = "layers" if getattr(t.texture.ty, "arrayed", False) else "depth"
            third = "samples" if getattr(t.texture.ty, "multisampled", False) else third
            extent = ", ".join(f"{a} {n}" for a, n in zip(("width", "height", third), size))
            raise OutOfBounds(
                f"{name} {what} is out of bounds ({extent}, one level) for {who}{self.where()}"
            )
        at = tuple(np.where(bad, 0, xyz[:, k]) for k in reversed(range(len(size))))
        return t.data[at]

    def texture_sample(
        self,
        t: TextureMemory,
        coords: np.ndarray,
        layer: np.ndarray | None = None,
        offset: np.ndarray | None = None,
    ) -> np.ndarray:
        """``textureSampleLevel`` through WebGPU's default sampler: each lane's texel nearest
        its normalised ``coords`` (x, y[, z]; texel ``floor(u * size)``), each coordinate
        clamped to the edge (NaN as 0), of the one mip level, a ``vec4<f32>`` (``[lanes,
        4]``), moved by ``offset`` texels where given (before the clamp); of a
        ``texture_2d_array``, in layer ``layer`` (already clamped to the layers);
        of a cube, the texel of the face ``coords`` points at (:func:`cube_face`)."""
        if getattr(t.texture.ty, "cube", False):
            face, x, y = cube_texel(broadcast(coords, self.n).reshape(self.n, 3), t.data.shape[-2])
            outer = () if layer is None else (broadcast(layer, self.n).reshape(-1),)
            return t.data[(*outer, face, y, x)]
        size = t.data.shape[-2::-1][: getattr(t.texture.ty, "dim", 2)]  # width, height[, depth]
        uvw = broadcast(coords, self.n).astype(np.float64).reshape(self.n, -1)  # 1-D: [n, 1]
        uvw = np.nan_to_num(uvw, nan=0.0)
        off = np.zeros((self.n, len(size)), np.int64) if offset is None else offset
        at = [
            np.clip(np.floor(uvw[:, k] * n) + off[:, k], 0, n - 1).astype(np.int64)
            for k, n in enumerate(size)
        ]
        if layer is not None:
            at.append(broadcast(layer, self.n).reshape(-1))
        return t.data[tuple(reversed(at))]

    def texture_gather(
        self,
        t: TextureMemory,
        coords: np.ndarray,
        layer: np.ndarray | None,
        offset: np.ndarray | None,
        channel: int,
        m: Mask,
    ) -> np.ndarray:
        """The four texels of 2-D texture ``t`` (their ``channel``) a bilinear filter reads at
        each lane's normalised ``coords``, in WGSL's order ``(umin, vmax), (umax, vmax), (umax,
        vmin), (umin, vmin)`` (``[lanes, 4]``): texels ``floor(u * size - 0.5)`` and the next,
        moved by ``offset`` texels where given, each clamped to the edge (NaN as 0); of an arrayed
        texture, in layer ``layer``; of a cube, :meth:`cube_gather`."""
        if getattr(t.texture.ty, "cube", False):
            return self.cube_gather(t, coords, layer, channel, m)
        size = t.data.shape[-2::-1][:2]  # width, height
        uv = np.nan_to_num(broadcast(coords, self.n).astype(np.float64).reshape(self.n, 2))
        off = np.zeros((self.n, 2), np.int64) if offset is None else offset
        lo = [np.floor(uv[:, k] * n - 0.5).astype(np.int64) + off[:, k] for k, n in enumerate(size)]
        (u0, v0), (u1, v1) = ([np.clip(c + d, 0, n - 1) for c, n in zip(lo, size)] for d in (0, 1))
        outer = () if layer is None else (broadcast(layer, self.n).reshape(-1),)
        corners = ((u0, v1), (u1, v1), (u1, v0), (u0, v0))
        return np.stack([t.data[(*outer, v, u, channel)] for u, v in corners], axis=1)

    def cube_gather(
        self, t: TextureMemory, coords: np.ndarray, layer: np.ndarray | None, channel: int, m: Mask
    ) -> np.ndarray:
        """The four texels of cube ``t`` a bilinear filter reads in each lane's direction
        ``coords`` (:func:`~kvdsl.interp.cubes.cube_footprint`: a texel past the face's edge is
        the next face's), their ``channel``, in WGSL's order; of a cube array, in layer
        ``layer``. An active lane whose footprint takes a cube's corner, where three faces meet
        and no fourth texel is (WGSL leaves what it reads to the implementation), is
        :class:`OutOfBounds`."""
        d = broadcast(coords, self.n).astype(np.float64).reshape(self.n, 3)
        faces, xs, ys, corner = cube_footprint(d, t.data.shape[-2])
        lanes = self.grid.active(m)
        if corner[lanes].any():
            j = int(lanes[np.flatnonzero(corner[lanes])[0]])
            who = self.grid.describe(int(self.grid.original(np.array([j]))[0]))
            raise OutOfBounds(
                f"{t.texture.name}: the texels gathered in direction {d[j].tolist()} take the "
                f"cube's corner, where three faces meet (WGSL leaves the fourth to the "
                f"implementation) for {who}{self.where()}"
            )
        outer = () if layer is None else (broadcast(layer, self.n).reshape(-1),)
        return np.stack(
            [t.data[(*outer, faces[k], ys[k], xs[k], channel)] for k in range(4)], axis=1
        )

    def texture_level(self, t: TextureMemory, level: np.ndarray, m: Mask) -> None:
        """``textureDimensions(t, level)``: a level other than 0 of an active lane is
        :class:`OutOfBounds` (the texture has one; WGSL leaves the result to the
        implementation)."""
        lanes = self.grid.active(m)
        lv = broadcast(level, self.n).astype(np.int64).reshape(-1)[lanes]
        if (lv != 0).any():
            j = int(lanes[np.flatnonzero(lv != 0)[0]])
            who = self.grid.describe(int(self.grid.original(np.array([j]))[0]))
            raise OutOfBounds(
                f"{t.texture.name} level {int(lv[lv != 0][0])} is out of bounds (one level) for "
                f"{who}{self.where()}"
            )

    # ---- storage textures ----------------------------------------------------------------
    def _texels(self, t: TextureMemory, coords: np.ndarray, lanes: np.ndarray):
        """The index (a tuple of arrays, outermost axis first) of each of ``lanes``' texel
        ``coords`` (x, y[, z]) in ``t.data``; :class:`OutOfBounds` where one lies outside."""
        size = t.data.shape[-2::-1]  # width, height[, depth]
        at = broadcast(coords, self.n).astype(np.int64).reshape(self.n, -1)[lanes]  # 1-D: [n, 1]
        bad = np.zeros(len(lanes), bool)
        for k, n in enumerate(size):
            bad |= (at[:, k] < 0) | (at[:, k] >= n)
        if bad.any():
            j = int(np.flatnonzero(bad)[0])
            texel = ", ".join(str(c) for c in at[j])
            third = "layers" if getattr(t.texture.ty, "arrayed", False) else "depth"
            extent = ", ".join(f"{a} {n}" for a, n in zip(("width", "height", third), size))
            who = self.grid.describe(int(self.grid.original(lanes[j : j + 1])[0]))
            raise OutOfBounds(
                f"{t.texture.name} texel ({texel}) is out of bounds ({extent}) for {who}"
                f"{self.where()}"
            )
        return tuple(at[:, k] for k in reversed(range(len(size))))

    def storage_texture_load(self, t: TextureMemory, coords: np.ndarray, m: Mask) -> np.ndarray:
        """``textureLoad`` of a ``read`` or ``read_write`` storage texture: each lane's texel
        ``coords`` (x, y[, z]) as a ``vec4`` of the format's channel type (lanes off the mask
        read texel 0); an active lane's texel outside the texture is :class:`OutOfBounds`, and,
        of a ``read_write`` texture, a texel another invocation stored in this dispatch a
        :class:`RaceError` (each read is recorded, for the writes after it)."""
        lanes = self.grid.active(m)
        at = self._texels(t, coords, lanes)
        if t.reader is not None:
            ids = self.grid.original(lanes).astype(np.int64)
            group = ids // self.grid.per_group
            writer = t.owner[at]
            ordered = t.ofenced[at] & (writer // self.grid.per_group == group)
            clash = (writer >= 0) & (writer != ids) & ~ordered
            if clash.any():
                j = int(np.flatnonzero(clash)[0])
                raise RaceError(
                    f"{t.texture.name} texel {_texel(at, j)}: "
                    f"{self.grid.describe(int(writer[j]))} writes it and "
                    f"{self.grid.describe(int(ids[j]))} reads it in one dispatch{self.where()}"
                )
            # Per texel, whether two invocations (two workgroups) read it in this statement.
            texel, back = np.unique(np.ravel_multi_index(at, t.owner.shape), return_inverse=True)
            several, groups = _mixed(back, len(texel), ids), _mixed(back, len(texel), group)
            old, old_group = t.reader[at], t.rgroup[at]
            # Reads a textureBarrier() of this workgroup followed: ordered before what comes.
            fresh = (old == -1) | (t.rfenced[at] & (old_group == group))
            t.reader[at] = np.where(~several & (fresh | (old == ids)), ids, -2)
            t.rgroup[at] = np.where(~groups & (fresh | (old_group == group)), group, -2)
            t.rfenced[at] = False
        out = np.zeros((self.n, 4), t.texture.ty.texel.scalar.dtype)
        out[lanes] = from_texels(t.texture.ty, t.data[at])
        return out

    def texture_store(self, t: TextureMemory, coords: np.ndarray, v: np.ndarray, m: Mask) -> None:
        """``textureStore``: each active lane's texel ``coords`` (x, y[, z]) set to ``v`` in
        the texture's format; a texel outside the texture is :class:`OutOfBounds` (WGSL leaves
        such a store to the implementation), one two invocations write a :class:`RaceError`,
        and, of a ``read_write`` texture, one another invocation read."""
        name = t.texture.name
        lanes = self.grid.active(m)
        at = self._texels(t, coords, lanes)
        ids = self.grid.original(lanes).astype(np.int64)
        group = ids // self.grid.per_group
        values = broadcast(v, self.n)[lanes]
        wide = unrepresentable(t.texture.ty, values)
        if wide.any():
            j = int(np.flatnonzero(wide)[0])
            raise OutOfBounds(
                f"{name} texel {_texel(at, j)}: {self.grid.describe(int(ids[j]))} stores "
                f"{values[j].tolist()}, which {t.texture.ty.format} cannot hold (WebGPU leaves "
                f"the texel to the implementation){self.where()}"
            )
        texels = to_texels(t.texture.ty, values)
        flat = np.ravel_multi_index(at, t.owner.shape)
        order = np.argsort(flat, kind="stable")
        same = flat[order][1:] == flat[order][:-1]
        earlier = t.owner[at]
        ordered = t.ofenced[at] & (earlier // self.grid.per_group == group)
        clash = (earlier >= 0) & (earlier != ids) & ~ordered
        if same.any() or clash.any():
            if same.any():
                j = int(np.flatnonzero(same)[0])
                a, b, k = ids[order][j], ids[order][j + 1], int(order[j])
            else:
                k = int(np.flatnonzero(clash)[0])
                a, b = earlier[k], ids[k]
            raise RaceError(
                f"{name} texel {_texel(at, k)}: {self.grid.describe(int(a))} and "
                f"{self.grid.describe(int(b))} both write it in one dispatch{self.where()}"
            )
        if t.reader is not None:  # a read_write texture: a texel another invocation read
            readers = t.reader[at]
            ordered = t.rfenced[at] & (t.rgroup[at] == group)
            clash = (readers != -1) & (readers != ids) & ~ordered
            if clash.any():
                j = int(np.flatnonzero(clash)[0])
                who = (
                    "other invocations" if readers[j] == -2 else self.grid.describe(int(readers[j]))
                )
                raise RaceError(
                    f"{name} texel {_texel(at, j)}: {who} read it and "
                    f"{self.grid.describe(int(ids[j]))} writes it in one dispatch{self.where()}"
                )
        t.owner[at] = ids
        t.ofenced[at] = False
        if t.reader is not None:  # the reads so far come before this write
            t.reader[at] = t.rgroup[at] = -1
            t.rfenced[at] = False
        t.data[at] = texels

    def fence_textures(self, groups: np.ndarray) -> None:
        """``textureBarrier()`` passed by the workgroups ``groups``: each texel access of
        theirs so far is ordered before their invocations' accesses after it."""
        p = self.grid.per_group
        for t in self.textures.values():
            if t.ofenced is None:
                continue
            t.ofenced |= (t.owner >= 0) & np.isin(t.owner // p, groups)
            if t.rfenced is not None:
                t.rfenced |= (t.rgroup >= 0) & np.isin(t.rgroup, groups)

    # ---- storage bindings ----------------------------------------------------------------


def _texel(at: tuple[np.ndarray, ...], j: int) -> str:
    """Texel ``j`` of index ``at`` (outermost axis first) as WGSL's coordinates, ``(x, y)``."""
    return "(" + ", ".join(str(int(a[j])) for a in reversed(at)) + ")"


def _mixed(back: np.ndarray, n: int, values: np.ndarray) -> np.ndarray:
    """Per entry of ``values`` (entry ``k`` of group ``back[k]`` of ``n``), whether its group
    holds two different values."""
    lo = np.full(n, np.iinfo(np.int64).max)
    hi = np.full(n, np.iinfo(np.int64).min)
    np.minimum.at(lo, back, values)
    np.maximum.at(hi, back, values)
    return (lo != hi)[back]


def _with_layer(coords: np.ndarray, layer: np.ndarray, n: int) -> np.ndarray:
    """An arrayed texture's texel coordinates and array index as one ``[n, 3]`` array of
    ``(x, y, layer)``, the layer the outermost axis of its texels."""
    xy = broadcast(coords, n).astype(np.int64)
    return np.concatenate([xy, broadcast(layer, n).astype(np.int64).reshape(n, 1)], axis=1)


def _returned(t: TextureMemory, texels: np.ndarray) -> np.ndarray:
    """Texels read of ``t`` (``[lanes, channels]``) as the builtin returns them: a depth
    texture's one channel an ``f32`` scalar a lane, the others' four a ``vec4``."""
    return texels.reshape(-1) if getattr(t.texture.ty, "depth", False) else texels
