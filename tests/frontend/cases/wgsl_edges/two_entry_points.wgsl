// expect: outside "a module with 2 @compute entry points (kvdsl takes exactly one)"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn a(@builtin(global_invocation_id) gid: vec3<u32>) { out[0u] = 1u; }
@compute @workgroup_size(64)
fn b(@builtin(global_invocation_id) gid: vec3<u32>) { out[0u] = 2u; }
