// expect: refused "array<u32, 3>(1u, 2u): components do not make a array<u32, 3>"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let a = array<u32, 3>(1u, 2u);
  out[0u] = a[0];
  out[0u] = 1u;
}
