// expect: taken
// tint: taken
// naga: taken
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read_write> c: array<atomic<u32>>;
var<workgroup> w: array<atomic<i32>, 4>;
// {body}
  atomicAdd(&w[gid.x % 4u], 1i);
  workgroupBarrier();
  out[gid.x] = u32(atomicLoad(&w[gid.x % 4u]));
