// expect: type error "@compute without @workgroup_size: a compute shader must include '@workgroup_size' in its attributes"
// tint: refused "a compute shader must include '@workgroup_size' in its attributes"
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute
fn main() { out[0] = 1u; }
