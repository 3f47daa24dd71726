// expect: refused "the address of a vector component"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  var v = vec2<u32>();
  let p = &v[1];
  out[0u] = 1u;
}
