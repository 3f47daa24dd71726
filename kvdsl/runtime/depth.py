"""Depth textures on the GPU: a ``texture_depth_2d`` (or ``_array``) the host gives as
``[height, width]`` (``[layers, height, width]``) ``float32`` values in [0, 1], held in a
``depth32float`` texture.

WebGPU copies into no ``depth32float`` texture (``queue.writeTexture`` and
``copyBufferToTexture`` refuse it as a destination), so :func:`upload_depth` writes one the way
WebGPU does allow: a render pass per layer, the layer's view the depth attachment, whose
full-screen triangle's fragment shader writes each pixel's value, read from a storage buffer
holding the host's array, as ``@builtin(frag_depth)``, the depth test ``always`` passing. A
``float32`` in [0, 1] is written as it is (the viewport's depth range clamps the others, which
:func:`kvdsl.ir.types.depth_refusal` refuses before)."""

from __future__ import annotations

import numpy as np

from kvdsl.runtime import device as gpu

#: The render pipeline writing the depth texels: pixel (x, y) of layer ``layer`` reads
#: ``depths[(layer * height + y) * width + x]``.
FILL = """
@group(0) @binding(0) var<storage, read> depths: array<f32>;
struct Place { layer: u32, width: u32, height: u32, pad: u32 }
@group(0) @binding(1) var<uniform> place: Place;

@vertex
fn cover(@builtin(vertex_index) i: u32) -> @builtin(position) vec4<f32> {
  let xy = vec2<f32>(f32((i << 1u) & 2u), f32(i & 2u)) * 2.0 - 1.0;
  return vec4<f32>(xy, 0.0, 1.0);
}

@fragment
fn fill(@builtin(position) at: vec4<f32>) -> @builtin(frag_depth) f32 {
  let x = u32(at.x);
  let y = u32(at.y);
  return depths[(place.layer * place.height + y) * place.width + x];
}
"""


def upload_depth(dev, data: np.ndarray):
    """A ``depth32float`` 2-D texture on ``dev`` holding ``data`` (``[height, width]``, or
    ``[layers, height, width]`` in as many array layers; ``float32`` in [0, 1]), bindable as a
    sampled texture."""
    wgpu = gpu.wgpu_module()
    layers, h, w = (1, *data.shape) if data.ndim == 2 else data.shape
    usage = wgpu.TextureUsage.TEXTURE_BINDING | wgpu.TextureUsage.RENDER_ATTACHMENT
    tex = dev.create_texture(size=(w, h, layers), format="depth32float", usage=usage)
    module = dev.create_shader_module(code=FILL)
    pipe = dev.create_render_pipeline(
        layout="auto",
        vertex={"module": module, "entry_point": "cover"},
        fragment={"module": module, "entry_point": "fill", "targets": []},
        primitive={"topology": "triangle-list"},
        depth_stencil={
            "format": "depth32float",
            "depth_write_enabled": True,
            "depth_compare": "always",
        },
    )
    held = np.ascontiguousarray(data, "<f4")
    depths = dev.create_buffer_with_data(data=held.tobytes(), usage=wgpu.BufferUsage.STORAGE)
    encoder = dev.create_command_encoder()
    for layer in range(layers):
        place = np.array([layer, w, h, 0], np.uint32).tobytes()
        uniform = dev.create_buffer_with_data(data=place, usage=wgpu.BufferUsage.UNIFORM)
        group = dev.create_bind_group(
            layout=pipe.get_bind_group_layout(0),
            entries=[
                {"binding": 0, "resource": {"buffer": depths, "offset": 0, "size": depths.size}},
                {"binding": 1, "resource": {"buffer": uniform, "offset": 0, "size": 16}},
            ],
        )
        view = tex.create_view(dimension="2d", base_array_layer=layer, array_layer_count=1)
        attachment = {
            "view": view,
            "depth_clear_value": 0.0,
            "depth_load_op": "clear",
            "depth_store_op": "store",
        }
        render = encoder.begin_render_pass(
            color_attachments=[], depth_stencil_attachment=attachment
        )
        render.set_pipeline(pipe)
        render.set_bind_group(0, group)
        render.draw(3)
        render.end()
    dev.queue.submit([encoder.finish()])
    return tex
