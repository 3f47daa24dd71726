struct Counters {
  done: atomic<u32>,
  total: f32,
}
// {head}
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
// {body}
}
