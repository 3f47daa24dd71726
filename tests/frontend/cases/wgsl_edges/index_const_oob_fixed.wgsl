// expect: refused "a[4i]: the constant index 4 is out of range (give 0 to 3)"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  var a: array<u32, 4>;
  out[0u] = a[4];
  out[0u] = 1u;
}
