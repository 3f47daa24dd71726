"""Textures the GPU path writes with a render pass, WebGPU copying into neither:
:func:`upload_depth`, a depth texture (``texture_depth_2d``, ``_array``, ``_cube`` ...) the host
gives as ``float32`` values in [0, 1], held in a ``depth32float`` texture; and
:func:`upload_multisampled`, a multisampled texture (``texture_multisampled_2d<T>``,
``texture_depth_multisampled_2d``) the host gives as ``[samples, height, width, 4]``
(``[samples, height, width]``), :data:`~kvdsl.ir.types.SAMPLE_COUNT` samples a texel.

Neither ``queue.writeTexture`` nor ``copyBufferToTexture`` writes a ``depth32float`` or a
multisampled texture, so each is the attachment of a render pass (one per layer of a layered
depth texture) whose full-screen triangle's fragment shader writes each pixel's value, read from
a storage buffer holding the host's array: as ``@builtin(frag_depth)`` (the depth test
``always`` passing) or as its colour, and, of a multisampled texture, each sample's own value,
the shader reading ``@builtin(sample_index)`` (which shades each sample on its own). A
``float32`` in [0, 1] is written as it is (the viewport's depth range clamps the others,
which :func:`kvdsl.ir.texels.depth_refusal` refuses before), a value of a 16-bit format as it is
(:func:`kvdsl.ir.texels.multisampled_refusal` refuses the others)."""

from __future__ import annotations

import numpy as np

from kvdsl.ir.types import SAMPLE_COUNT, SampledTexture
from kvdsl.runtime import device as gpu

#: The render pipeline writing the texels: pixel (x, y) of layer (or sample) ``k`` reads
#: ``texels[(k * height + y) * width + x]``. ``{texel}``: its type; ``{out}``: what the
#: fragment shader writes; ``{sample}``: the sample index parameter, where one is read.
FILL = """
@group(0) @binding(0) var<storage, read> texels: array<{texel}>;
struct Place {{ layer: u32, width: u32, height: u32, pad: u32 }}
@group(0) @binding(1) var<uniform> place: Place;

@vertex
fn cover(@builtin(vertex_index) i: u32) -> @builtin(position) vec4<f32> {{
  let xy = vec2<f32>(f32((i << 1u) & 2u), f32(i & 2u)) * 2.0 - 1.0;
  return vec4<f32>(xy, 0.0, 1.0);
}}

@fragment
fn fill(@builtin(position) at: vec4<f32>{sample}) -> {out} {{
  let k = {outer};
  return texels[(k * place.height + u32(at.y)) * place.width + u32(at.x)];
}}
"""


def upload_depth(dev, data: np.ndarray):
    """A ``depth32float`` 2-D texture on ``dev`` holding ``data`` (``[height, width]``, or
    ``[layers, height, width]`` in as many array layers; ``float32`` in [0, 1]), bindable as a
    sampled texture."""
    layers = 1 if data.ndim == 2 else data.shape[0]
    return _render(dev, data, "depth32float", "f32", layers, 1)


def upload_multisampled(dev, ty: SampledTexture, data: np.ndarray):
    """A multisampled 2-D texture of :data:`~kvdsl.ir.types.SAMPLE_COUNT` samples on ``dev``
    in ``ty``'s format holding ``data`` (``[samples, height, width, 4]`` of ``ty``'s dtype, or
    ``[samples, height, width]`` ``float32`` of a depth texture), bindable as a sampled
    texture."""
    texel = "f32" if ty.depth else f"vec4<{ty.sample}>"
    return _render(dev, data, ty.format, texel, 1, SAMPLE_COUNT)


def _render(dev, data: np.ndarray, fmt: str, texel: str, layers: int, samples: int):
    """A ``fmt`` texture of ``layers`` layers and ``samples`` samples a texel, each layer (or
    sample) ``k`` of ``data`` (outermost axis) written by a render pass."""
    wgpu = gpu.wgpu_module()
    h, w = data.shape[-2:] if texel == "f32" else data.shape[-3:-1]
    depth = fmt == "depth32float"
    usage = wgpu.TextureUsage.TEXTURE_BINDING | wgpu.TextureUsage.RENDER_ATTACHMENT
    tex = dev.create_texture(size=(w, h, layers), format=fmt, usage=usage, sample_count=samples)
    code = FILL.format(
        texel=texel,
        out="@builtin(frag_depth) f32" if depth else f"@location(0) {texel}",
        sample=", @builtin(sample_index) sample: u32" if samples > 1 else "",
        outer="sample" if samples > 1 else "place.layer",
    )
    module = dev.create_shader_module(code=code)
    targets = [] if depth else [{"format": fmt}]
    pipe = dev.create_render_pipeline(
        layout="auto",
        vertex={"module": module, "entry_point": "cover"},
        fragment={"module": module, "entry_point": "fill", "targets": targets},
        primitive={"topology": "triangle-list"},
        depth_stencil=(
            {"format": fmt, "depth_write_enabled": True, "depth_compare": "always"}
            if depth
            else None
        ),
        multisample={"count": samples},
    )
    held = np.ascontiguousarray(data, data.dtype.newbyteorder("<"))
    source = dev.create_buffer_with_data(data=held.tobytes(), usage=wgpu.BufferUsage.STORAGE)
    encoder = dev.create_command_encoder()
    for layer in range(layers):
        place = np.array([layer, w, h, 0], np.uint32).tobytes()
        uniform = dev.create_buffer_with_data(data=place, usage=wgpu.BufferUsage.UNIFORM)
        group = dev.create_bind_group(
            layout=pipe.get_bind_group_layout(0),
            entries=[
                {"binding": 0, "resource": {"buffer": source, "offset": 0, "size": source.size}},
                {"binding": 1, "resource": {"buffer": uniform, "offset": 0, "size": 16}},
            ],
        )
        view = tex.create_view(dimension="2d", base_array_layer=layer, array_layer_count=1)
        if depth:
            attachment = {
                "view": view,
                "depth_clear_value": 0.0,
                "depth_load_op": "clear",
                "depth_store_op": "store",
            }
            render = encoder.begin_render_pass(
                color_attachments=[], depth_stencil_attachment=attachment
            )
        else:
            colour = {"view": view, "load_op": "clear", "store_op": "store"}
            render = encoder.begin_render_pass(color_attachments=[colour])
        render.set_pipeline(pipe)
        render.set_bind_group(0, group)
        render.draw(3)
        render.end()
    dev.queue.submit([encoder.finish()])
    return tex
