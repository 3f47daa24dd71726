// expect: type error "an entry point with a return type (a compute entry point returns nothing)"
// tint: refused "missing entry point IO attribute on return type"
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main() -> u32 { out[0u] = 1u; return 1u; }
