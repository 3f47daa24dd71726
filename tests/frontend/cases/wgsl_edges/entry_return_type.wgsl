// expect: outside "an entry point with a return type"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main() -> u32 { out[0u] = 1u; return 1u; }
