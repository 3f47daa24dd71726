// {head}
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
// {body}
  out[0u] = 1u;
}
