// expect: outside "takes 0 arguments"
// tint: refused
// naga: refused
// in: _kernel.wgsl
  let e = subgroupElect(1u);
