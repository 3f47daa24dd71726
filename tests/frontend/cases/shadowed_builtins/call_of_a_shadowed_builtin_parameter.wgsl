// expect: refused "'abs' is a param here, not the builtin function: it cannot be called"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[gid.x] = f(gid.x);
}
fn f(abs: u32) -> u32 {
  return abs(i32(abs));
}
