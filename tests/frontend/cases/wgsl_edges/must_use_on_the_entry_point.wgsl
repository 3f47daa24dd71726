// expect: type error "attribute @must_use on the entry point (a compute entry point takes @compute, @workgroup_size and @diagnostic, each once)"
// tint: refused "'@must_use' can only be applied to functions that return a value"
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(1) @must_use
fn main() { out[0] = 1u; }
