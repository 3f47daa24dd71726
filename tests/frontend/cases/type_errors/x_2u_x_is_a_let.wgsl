// expect: type error at 8 "x = 2u: 'x' is a let, not a var"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let x = 1u;

  x = 2u;
  out[0u] = 1u;
}
