struct Out {
  total: f32,
  count: u32,
}
@group(0) @binding(0) var<storage, read_write> outs: array<Out>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
// {body}
  outs[gid.x] = Out();
}
