// expect: refused "binding 'out': element type bool cannot be stored"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<bool>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) { out[0u] = true; }
