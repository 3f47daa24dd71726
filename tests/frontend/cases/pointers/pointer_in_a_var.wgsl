// expect: refused "a var cannot have type ptr"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  var a = 1u;
  var p = &a;
  out[0u] = 1u;
}
