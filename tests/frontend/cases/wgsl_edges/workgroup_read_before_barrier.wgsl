// expect: taken
// tint: taken
// naga: taken
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
var<workgroup> w: array<u32, 64>;
@compute @workgroup_size(64)
fn main(@builtin(local_invocation_id) lid: vec3<u32>) { w[lid.x] = 1u; out[lid.x] = w[(lid.x + 1u) % 64u]; }
