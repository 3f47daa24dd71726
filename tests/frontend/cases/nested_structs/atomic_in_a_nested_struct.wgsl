// expect: taken
// tint: taken
// naga: taken
struct Slot {
  hits: atomic<u32>,
  pad: u32,
}
struct Table {
  slots: array<Slot, 4>,
  n: u32,
}
@group(0) @binding(0) var<storage, read_write> t: Table;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[gid.x] = atomicAdd(&t.slots[gid.x % 4u].hits, 1u);
}
