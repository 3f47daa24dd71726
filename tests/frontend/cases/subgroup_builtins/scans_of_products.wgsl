// expect: taken
// tint: taken
// naga: taken
// in: _kernel.wgsl
  out[gid.x] = subgroupExclusiveMul(gid.x) + subgroupInclusiveMul(gid.x);
