// expect: type error "@compute takes no arguments"
// tint: refused "compute attribute doesn't take parenthesis"
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute(1) @workgroup_size(64)
fn main() { out[0] = 1u; }
