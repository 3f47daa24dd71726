// expect: taken
// tint: taken
// naga: taken
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read> src: array<u32>;
var<workgroup> w: array<u32, 64>;
// {body}
  let v = vec4<f32>();
  let z = array<i32, 3>();
  out[2] = u32(v.x) + u32(z[1]) + u32();
