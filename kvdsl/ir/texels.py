"""What the host gives a texture as: the type of its texel coordinates (:func:`texel_coords`), the
axes of its array (:func:`host_axes`), whether an array has them (:func:`host_shape_fits`), and
the values a texture's format cannot hold, refused in words (:func:`texel_refusal`)."""

from __future__ import annotations

import numpy as np

from kvdsl.ir.types import EXTERNAL_PLANE, SAMPLE_COUNT, SampledTexture, Scalar, StorageTexture, Vec


def texel_coords(dim: int, scalar: Scalar) -> Scalar | Vec:
    """The type of a texture's texel coordinates of ``scalar``: a ``vecN`` of a texture of
    ``dim`` N, the scalar itself of a 1-D one."""
    return scalar if dim == 1 else Vec(dim, scalar)


def host_axes(ty: StorageTexture | SampledTexture) -> tuple[str, ...]:
    """The axes of the array the host gives texture type ``ty`` as, outermost first, in words
    (``("height", "width", "4")``): a depth texture's has no channel axis, a cube's six faces
    of ``size`` by ``size`` (``("6", "size", "size", "4")``)."""
    axes = ("depth", "height", "width")[3 - ty.dim :]
    axes = ("6", "size", "size") if getattr(ty, "cube", False) else axes
    axes = ("samples", *axes) if getattr(ty, "multisampled", False) else axes
    axes = ("layers", *axes) if getattr(ty, "arrayed", False) else axes
    return axes if getattr(ty, "depth", False) else (*axes, str(ty.channels))


def host_shape_fits(ty: StorageTexture | SampledTexture, shape: tuple[int, ...]) -> bool:
    """Whether an array of ``shape`` has the axes :func:`host_axes` names for ``ty``: as many,
    each numbered one of that length, the ``size`` ones (a cube's faces) of one length."""
    axes = host_axes(ty)
    if len(shape) != len(axes):
        return False
    sizes = {n for a, n in zip(axes, shape) if a == "size"}
    return len(sizes) < 2 and all(not a.isdigit() or int(a) == n for a, n in zip(axes, shape))


def depth_refusal(name: str, ty: SampledTexture, given: np.ndarray) -> str | None:
    """Why the host's array ``given`` cannot be depth texture ``name``'s texels (a value
    outside [0, 1], or NaN: a render pass, the one way WebGPU writes ``depth32float``, clamps
    what it writes to the viewport's depth range [0, 1]), else None."""
    bad = ~((given >= 0) & (given <= 1))
    what = "a depth texture's values are in [0, 1] (a render pass, the one way WebGPU writes "
    return _first(name, ty, given, bad, what + "depth32float, clamps to that)")


def texel_refusal(name: str, ty: StorageTexture | SampledTexture, given: np.ndarray) -> str | None:
    """Why the host's array ``given`` (of the axes :func:`host_axes` names) cannot be texture
    ``name``'s texels: :func:`multisampled_refusal` of a multisampled texture,
    :func:`external_refusal` of an external one, :func:`depth_refusal` of a depth texture; else
    None."""
    if getattr(ty, "multisampled", False):
        return multisampled_refusal(name, ty, given)
    if getattr(ty, "external", False):
        return external_refusal(name, ty, given)
    if getattr(ty, "depth", False):
        return depth_refusal(name, ty, given)
    return None


def multisampled_refusal(name: str, ty: SampledTexture, given: np.ndarray) -> str | None:
    """Why the host's array ``given`` cannot be multisampled texture ``name``'s texels (a count
    of samples other than :data:`~kvdsl.ir.types.SAMPLE_COUNT`, a value the texture's 16-bit
    format does not hold exactly), else None."""
    if given.shape[0] != SAMPLE_COUNT:
        return (
            f"texture '{name}' ({ty}) is given {given.shape[0]} samples a texel: WebGPU's "
            f"multisampled textures have {SAMPLE_COUNT}"
        )
    if ty.depth:
        return depth_refusal(name, ty, given)
    if ty.sample.name == "f32":
        with np.errstate(over="ignore"):
            bad = given.astype(np.float16).astype(np.float32) != given
        what = "an f16 value (its format, rgba16float, holds f16)"
    else:
        info = np.iinfo(np.uint16 if ty.sample.name == "u32" else np.int16)
        bad = (given < info.min) | (given > info.max)
        what = f"in [{info.min}, {info.max}] (its format, {ty.format}, holds 16 bits)"
    why = f"a multisampled texture's values are {what}; WebGPU multisamples no format of "
    return _first(name, ty, given, bad, why + "32-bit channels")


def external_refusal(name: str, ty: SampledTexture, given: np.ndarray) -> str | None:
    """Why the host's array ``given`` cannot be external texture ``name``'s texels (a value
    its plane's format, :data:`~kvdsl.ir.types.EXTERNAL_PLANE`, does not hold exactly, or one
    not finite: the colour conversion Dawn applies as it reads, an identity gamut matrix,
    makes an infinite channel's neighbours NaN, 0 times inf), else None."""
    with np.errstate(over="ignore", invalid="ignore"):
        bad = ~np.isfinite(given) | (given.astype(np.float16).astype(np.float32) != given)
    what = f"an external texture's values are finite f16 values (its plane, {EXTERNAL_PLANE}, "
    return _first(name, ty, given, bad, what + "holds f16)")


def _first(name: str, ty: object, given: np.ndarray, bad: np.ndarray, what: str) -> str | None:
    """The refusal of the first value ``bad`` marks in texture ``name``'s array ``given``
    (its value, its place, ``what`` the texture holds), else None."""
    if not bad.any():
        return None
    at = [int(i) for i in np.argwhere(bad)[0]]
    return f"texture '{name}' ({ty}) holds {given[tuple(at)]!s} at {at}: {what}"
