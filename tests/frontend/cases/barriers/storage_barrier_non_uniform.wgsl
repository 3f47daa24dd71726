// expect: refused "storageBarrier() must be reached in uniform control flow"
// tint: refused "storageBarrier"
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  if (gid.x < 4u) { storageBarrier(); }
