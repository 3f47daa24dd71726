// expect: refused "subgroupBroadcast must be a const-expression"
// tint: refused
// naga: refused
// in: _kernel.wgsl
  out[gid.x] = subgroupBroadcast(gid.x, nwg.x);
