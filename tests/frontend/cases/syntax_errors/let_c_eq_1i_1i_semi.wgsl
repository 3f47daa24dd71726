// expect: syntax error at 6:13 "unexpected '--'; expected one of ';' or an operator"
// tint: taken
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let c = 1i--1i;
  out[0u] = 1u;
}
