// expect: outside "struct field a: atomic<u32>"
// tint: refused
// naga: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read_write> c: array<atomic<u32>>;
struct P { a: atomic<u32> }
@group(0) @binding(2) var<uniform> params: P;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {

  out[0u] = 1u;
}
