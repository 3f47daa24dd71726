// expect: type error at 7 "let y: i32 is initialised with a u32"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let x = 1u;
  let y: i32 = x;
  out[0u] = 1u;
}
