// expect: type error "'@builtin(vertex_index)' of 'v' cannot be used for compute shader input"
// tint: refused "'@builtin(vertex_index)' cannot be used for compute shader input"
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(vertex_index) v: u32) { out[0u] = v; }
