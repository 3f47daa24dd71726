// expect: refused "subgroupAdd() must be called in uniform control flow"
// tint: refused
// naga: taken
// in: _kernel.wgsl
  if gid.x > 3u {
    out[gid.x] = subgroupAdd(gid.x);
  }
