// expect: refused "f(1u): f returns no value (call it as a statement)"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
fn f(x: u32) { }
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[0u] = f(1u);
}
