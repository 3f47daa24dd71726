// expect: type error at 5:10 "'@builtin(position)' of 'p' cannot be used for compute shader input (a compute entry point's builtins are global_invocation_id, local_invocation_id, local_invocation_index, workgroup_id, num_workgroups, subgroup_size, subgroup_invocation_id, num_subgroups, subgroup_id, workgroup_index, global_invocation_index)"
// tint: refused "'@builtin(position)' cannot be used for compute shader input"
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(position) p: vec4<f32>) { out[0u] = u32(p.x); }
