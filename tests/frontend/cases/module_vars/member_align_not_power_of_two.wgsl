// expect: type error "struct P member b: @align(12) (WGSL takes a power of two that is a multiple of u32's alignment, 4)"
// tint: refused
struct P { a: u32, @align(12) b: u32 }
@group(0) @binding(0) var<storage, read_write> out: array<P>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[gid.x].b = 1u;
}
