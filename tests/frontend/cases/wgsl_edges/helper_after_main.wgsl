// expect: refused "undefined name 'out'"
// tint: refused
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[0u] = f(1u);
}
fn f(x: u32) -> u32 { return x; }
