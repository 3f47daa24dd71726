// expect: taken
// tint: refused "subgroup_size"
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(subgroup_size) s: u32) { out[0u] = s; }
