// expect: refused "function f must end with a return"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
fn f(x: u32) -> u32 {
  if (x > 1u) { return 1u; }
}
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[0u] = f(gid.x);
}
