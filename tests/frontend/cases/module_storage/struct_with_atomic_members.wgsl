// expect: taken
// tint: taken
// naga: taken
struct Counters {
  done: atomic<u32>,
  low: atomic<i32>,
  total: f32,
}
@group(0) @binding(0) var<storage, read_write> ctr: Counters;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let p = &ctr.done;
  out[gid.x] = atomicAdd(p, 1u);
  atomicMin(&ctr.low, -i32(gid.x));
  if gid.x == 0u {
    ctr.total = 1.5;
  }
}
