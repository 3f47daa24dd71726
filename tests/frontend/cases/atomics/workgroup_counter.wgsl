// expect: taken
// tint: taken
// naga: taken
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read_write> c: array<atomic<u32>>;
var<workgroup> count: atomic<u32>;
// {body}
  let slot = atomicAdd(&count, 1u);
  workgroupBarrier();
  out[slot] = atomicLoad(&count);
