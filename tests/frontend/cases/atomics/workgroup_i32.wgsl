// expect: taken
// tint: taken
// naga: taken
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read_write> c: array<atomic<u32>>;
var<workgroup> w: array<atomic<i32>, 4>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  atomicAdd(&w[gid.x % 4u], 1i);
  workgroupBarrier();
  out[gid.x] = u32(atomicLoad(&w[gid.x % 4u]));
  out[0u] = 1u;
}
