// expect: outside "@builtin of 'v' (one of global_invocation_id, local_invocation_id, local_invocation_index, workgroup_id, num_workgroups, subgroup_size, subgroup_invocation_id)"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(vertex_index) v: u32) { out[0u] = v; }
