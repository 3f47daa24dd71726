// expect: taken
// tint: taken
// naga: taken
@group(0) @binding(0) var<storage, read_write> out: array<vec3<f32>>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) { out[0u] = vec3<f32>(1.0); }
