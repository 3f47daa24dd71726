// expect: refused "binding 'ctr' of type Counters holds an atomic: it is not read whole"
// tint: refused "cannot be used as the type of a 'let'"
// naga: taken
struct Counters {
  done: atomic<u32>,
  total: f32,
}
@group(0) @binding(0) var<storage, read_write> ctr: Counters;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let c = ctr;
  out[gid.x] = c.total;
}
