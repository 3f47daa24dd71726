// expect: type error "@workgroup_size takes 1 to 3 arguments, got 4"
// tint: refused "workgroup_size expects at most 3 arguments, got 4"
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(1, 1, 1, 1)
fn main() { out[0] = 1u; }
