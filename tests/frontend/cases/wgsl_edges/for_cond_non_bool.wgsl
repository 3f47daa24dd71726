// expect: refused "condition is u32, expected bool"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  for (var i = 0u; i; i++) { }
  out[0u] = 1u;
  out[0u] = 1u;
}
