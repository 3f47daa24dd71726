// expect: syntax error at 6:11 "literal 2147483648i does not fit i32"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let x = 2147483648i;
  out[0u] = 1u;
}
