// expect: refused "binding 'ctr': struct Counters holds an atomic, and the binding is read"
// tint: refused "must have 'read_write' access mode"
// naga: taken
struct Counters {
  done: atomic<u32>,
  total: f32,
}
@group(0) @binding(0) var<storage, read> ctr: Counters;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[gid.x] = ctr.total;
}
