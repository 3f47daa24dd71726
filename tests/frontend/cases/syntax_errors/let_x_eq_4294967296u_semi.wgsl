// expect: syntax error at 6:11 "literal 4294967296u does not fit u32"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let x = 4294967296u;
  out[0u] = 1u;
}
