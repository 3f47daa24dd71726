// expect: refused "struct A member b: unknown type 'Missing'"
// tint: refused "unresolved type 'Missing'"
// naga: refused
struct A {
  x: u32,
  b: Missing,
}
@group(0) @binding(0) var<storage, read_write> out: array<A>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[gid.x].x = 1u;
}
