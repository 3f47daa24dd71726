// expect: refused "vec4<f32>(vec2<f32>(1.0f), 1.0f): components do not make a vec4<f32>"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  let v = vec4<f32>(vec2<f32>(1.0), 1.0);
  out[0u] = u32(v.x);
