"""External textures on the GPU, which Dawn alone makes: a ``texture_external`` the host gives
as ``[height, width, 4]`` ``float32`` values f16 holds (:func:`kvdsl.ir.texels.external_refusal`
refuses the others), held in one ``rgba16float`` plane (:data:`kvdsl.ir.types.EXTERNAL_PLANE`)
of an external texture made by ``wgpudawn``'s ``create_external_texture``, no second plane, so
no YUV conversion. wgpu-native makes none (wgpu-py's ``import_external_texture`` is for browsers
only, ``libwgpu_native`` exports no ``wgpuDeviceCreateExternalTexture``):
:func:`needs_dawn` says so, naming the binding.

Dawn converts the colour of what a kernel reads of an external texture of one plane (Tint's
``gammaCorrection`` of the RGB channels, ``sign(v) * (C * |v| + F)`` where ``|v| < D``, else
``sign(v) * (pow(A * |v| + B, G) + E)``, then the gamut matrix, then ``gammaCorrection`` again).
The transfer functions here are :data:`LINEAR`: ``D`` past every finite f16, ``C`` 1, ``F`` 0, so
each channel takes the linear branch and comes back as it is, exactly (``pow``, the other
branch, is approximate on a GPU); the gamut matrix is the identity (``1 * r + 0 * g + 0 * b`` is
``r`` of finite values). The crop is the whole plane, unrotated, unmirrored, so ``textureLoad``,
``textureSampleBaseClampToEdge`` and ``textureDimensions`` read the plane's texels and size."""

from __future__ import annotations

from kvdsl.ir.tree import Texture

#: The transfer function (skcms' parameters g, a, b, c, d, e, f) Dawn decodes and encodes an
#: external texture's colour with: its linear branch, ``c * |v| + f``, for ``|v|`` below ``d``,
#: which is past every finite f16 (65504).
LINEAR = (1.0, 1.0, 0.0, 1.0, 65536.0, 0.0, 0.0)


def needs_dawn(texture: Texture, implementation: str) -> str:
    """Why ``implementation`` (wgpu-native) cannot bind external texture ``texture``, in
    words."""
    return (
        f"texture '{texture.name}' is a {texture.ty}: it needs Dawn (--webgpu dawn, "
        f"KVDSL_WEBGPU=dawn or use_webgpu(WebGPU('dawn'))), as {implementation} cannot make an "
        "external texture (the interpreter runs the kernel: kvdsl run --backend interp)"
    )


def external_texture(dev, plane):
    """An external texture on Dawn device ``dev`` of one plane, ``plane`` (a texture of
    :data:`~kvdsl.ir.types.EXTERNAL_PLANE`), read as it is (:data:`LINEAR`)."""
    from wgpudawn.backends.dawn.extras import create_external_texture

    return create_external_texture(
        dev,
        plane.create_view(),
        src_transfer_function=LINEAR,
        dst_transfer_function=LINEAR,
    )
