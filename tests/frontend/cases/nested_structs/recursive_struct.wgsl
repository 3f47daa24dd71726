// expect: refused "struct B member a: A contains B (WGSL refuses a recursive struct)"
// tint: refused "cyclic dependency"
// naga: refused
struct A {
  x: u32,
  b: B,
}
struct B {
  a: A,
}
@group(0) @binding(0) var<storage, read_write> out: array<A>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[gid.x].x = 1u;
}
