// expect: refused "expects an integer scalar or vector"
// tint: refused
// naga: refused
// in: _kernel.wgsl
  fo[gid.x] = subgroupAnd(1.5);
