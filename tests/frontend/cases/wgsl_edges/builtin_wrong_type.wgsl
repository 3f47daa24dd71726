// expect: refused "builtin 'gid' of type vec3<i32>: @builtin(global_invocation_id) is vec3<u32>"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<i32>) {
  out[0u] = 1u;
}
