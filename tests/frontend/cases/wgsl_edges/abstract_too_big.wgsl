// expect: refused "literal 2147483648 is not a valid i32 value"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let x: i32 = 2147483648;
  out[0u] = u32(x);
  out[0u] = 1u;
}
