// expect: refused "a[-1i]: the constant index -1 is out of range (give 0 or more)"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  var a: array<u32, 4>;
  out[0u] = a[-1];
  out[0u] = 1u;
}
