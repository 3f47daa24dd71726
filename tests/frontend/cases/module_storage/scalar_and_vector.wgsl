// expect: taken
// tint: taken
// naga: taken
@group(0) @binding(0) var<storage, read> scale: f32;
@group(0) @binding(1) var<storage, read_write> acc: vec4<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[gid.x] = scale * acc.y + acc[gid.x % 4u];
  if gid.x == 0u {
    acc.z = scale;
  }
}
