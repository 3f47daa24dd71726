// expect: type error at 6 "(1u + 1i): + operands of different types: u32, i32"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let x = 1u + 1i;
  out[0u] = 1u;
}
