"""Cube textures' geometry in the interpreter: the face a direction points at and the face
coordinates there (Vulkan's cube map face selection, which WebGPU's cubes follow), the texel the
default sampler (nearest, clamped) reads, and the four texels a gather reads, those past a
face's edge on the next face (Vulkan's cube map edge handling)."""

from __future__ import annotations

import numpy as np

#: Per face of a cube (+X, -X, +Y, -Y, +Z, -Z), for its face coordinates s and t, the axis of
#: the direction and the sign each takes (Vulkan's cube map face selection table).
CUBE_FACES = (
    ((2, -1), (1, -1)),
    ((2, 1), (1, -1)),
    ((0, 1), (2, 1)),
    ((0, 1), (2, -1)),
    ((0, 1), (1, -1)),
    ((0, -1), (1, -1)),
)


def cube_st(directions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The face (0 to 5: +X, -X, +Y, -Y, +Z, -Z) each of ``directions`` (``[lanes, 3]``) points
    at, its major axis the component of the largest magnitude (x before y before z where two
    tie), and the face coordinates there, ``s = sc / (2 |rc|) + 0.5`` and ``t`` likewise, by
    Vulkan's table (a zero or NaN direction: face +X, (0, 0))."""
    d = np.nan_to_num(directions.astype(np.float64))
    lanes = np.arange(len(d))
    major = np.argmax(np.abs(d), axis=1)
    face = 2 * major + (d[lanes, major] < 0)
    rc = np.abs(d[lanes, major])
    st = []
    for k in (0, 1):  # s, then t
        axis = np.array([f[k][0] for f in CUBE_FACES])[face]
        sign = np.array([f[k][1] for f in CUBE_FACES])[face]
        with np.errstate(divide="ignore", invalid="ignore"):
            st.append(np.nan_to_num(sign * d[lanes, axis] / (2 * rc) + 0.5))
    return face, st[0], st[1]


def cube_texel(directions: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The face each of ``directions`` points at (:func:`cube_st`) and the texel (x, y) of that
    face, of ``size`` texels a side, the default sampler reads: ``floor(s * size)``, clamped to
    the face."""
    face, s, t = cube_st(directions)
    x, y = (np.clip(np.floor(c * size), 0, size - 1).astype(np.int64) for c in (s, t))
    return face, x, y


def cube_footprint(directions: np.ndarray, size: int):
    """The four texels a bilinear filter reads in each of ``directions``, in WGSL's gather
    order ``(umin, vmax), (umax, vmax), (umax, vmin), (umin, vmin)``: of the face it points at,
    texels ``floor(s * size - 0.5)`` and the next; a texel past one edge of the face is the
    texel of the next face its centre's direction points at (Vulkan's cube map edge handling);
    ``(faces, xs, ys, corner)``, the first three four ``[lanes]`` arrays each, ``corner`` where a
    lane's texels pass two edges at once (a cube's corner, where no fourth texel is)."""
    face, s, t = cube_st(directions)
    i0, j0 = (np.floor(c * size - 0.5).astype(np.int64) for c in (s, t))
    corner = np.zeros(len(face), bool)
    faces, xs, ys = [], [], []
    for di, dj in ((0, 1), (1, 1), (1, 0), (0, 0)):
        i, j = i0 + di, j0 + dj
        corner |= ((i < 0) | (i >= size)) & ((j < 0) | (j >= size))
        # The direction of texel (i, j)'s centre on the face's plane, past its edges too.
        towards = np.zeros((len(face), 3))
        major, sign = face // 2, np.where(face % 2 == 0, 1.0, -1.0)
        towards[np.arange(len(face)), major] = sign
        for k, c in ((0, i), (1, j)):
            axis = np.array([f[k][0] for f in CUBE_FACES])[face]
            to = np.array([f[k][1] for f in CUBE_FACES])[face]
            towards[np.arange(len(face)), axis] += to * (2 * (c + 0.5) / size - 1)
        f2, x2, y2 = cube_texel(towards, size)
        faces.append(f2)
        xs.append(x2)
        ys.append(y2)
    return faces, xs, ys, corner
