// expect: type error "entry point parameter 'x' without @builtin (a compute entry point's inputs are builtins)"
// tint: refused "missing entry point IO attribute on parameter"
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(1)
fn main(x: u32) { out[0] = x; }
