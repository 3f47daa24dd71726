// expect: refused "expects a u32 delta, got i32"
// tint: refused
// naga: refused
// in: _kernel.wgsl
  out[gid.x] = subgroupShuffleUp(gid.x, 1i);
