// expect: outside "workgroup var 'w' of type array<u32> (fixed-size arrays, atomics, scalars, vectors, matrices and structs)"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
var<workgroup> w: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[0u] = w[0];
}
