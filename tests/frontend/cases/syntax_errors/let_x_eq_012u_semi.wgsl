// expect: syntax error at 6:11 "leading zeros are not allowed in a WGSL literal"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let x = 012u;
  out[0u] = 1u;
}
