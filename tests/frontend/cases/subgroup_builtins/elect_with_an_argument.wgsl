// expect: type error "subgroupElect takes 0 arguments, got 1"
// tint: refused
// naga: refused
// in: _kernel.wgsl
  let e = subgroupElect(1u);
