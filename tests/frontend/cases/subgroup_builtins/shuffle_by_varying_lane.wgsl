// expect: taken
// tint: taken
// naga: taken
// in: _kernel.wgsl
  out[gid.x] = subgroupShuffle(gid.x, gid.x ^ 1u);
