// expect: taken
// tint: taken
// naga: taken
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read> src: array<u32>;
var<workgroup> w: array<u32, 64>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let v = vec4<f32>();
  let z = array<i32, 3>();
  out[2] = u32(v.x) + u32(z[1]) + u32();
  out[0u] = 1u;
}
