// expect: taken
// tint: taken
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<uniform> a: u32;
@group(0) @binding(2) var<uniform> b: vec4<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[gid.x] = a + b[gid.x % 4u];
}
