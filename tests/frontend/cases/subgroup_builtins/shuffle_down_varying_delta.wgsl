// expect: refused "the delta of subgroupShuffleDown() must be uniform"
// tint: refused
// naga: taken
// in: _kernel.wgsl
  out[gid.x] = subgroupShuffleDown(gid.x, gid.x);
