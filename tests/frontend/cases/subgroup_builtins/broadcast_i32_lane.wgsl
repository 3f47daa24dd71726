// expect: refused "expects a u32 lane, got i32"
// tint: taken
// naga: refused
// in: _kernel.wgsl
  out[gid.x] = subgroupBroadcast(gid.x, 1i);
