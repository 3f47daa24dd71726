// expect: taken
// tint: taken
// naga: taken
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
var<workgroup> w: array<bool, 4>;
@compute @workgroup_size(64)
fn main(@builtin(local_invocation_id) lid: vec3<u32>) { w[0] = true; workgroupBarrier(); out[0u] = select(0u, 1u, w[0]); }
