// expect: refused "@must_use"
// tint: refused
// naga: refused
// in: _kernel.wgsl
  subgroupAdd(gid.x);
