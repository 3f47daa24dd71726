// expect: refused "f(1i): f takes (u32), got (i32)"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
fn f(x: u32) -> u32 { return x; }
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[0u] = f(1i);
}
