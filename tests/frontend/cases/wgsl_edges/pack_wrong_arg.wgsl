// expect: refused "pack2x16float(vec4<f32>(1.0f)): pack2x16float expects vec2<f32>, got vec4<f32>"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  out[0u] = pack2x16float(vec4<f32>(1.0));
