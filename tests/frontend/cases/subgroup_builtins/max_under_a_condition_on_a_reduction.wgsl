// expect: refused "subgroupMax() must be called in uniform control flow"
// tint: refused
// naga: taken
// in: _kernel.wgsl
  if subgroupAdd(gid.x) > 3u {
    out[gid.x] = subgroupMax(gid.x);
  }
