// expect: refused "expects a numeric scalar or vector"
// tint: refused
// naga: refused
// in: _kernel.wgsl
  let b = subgroupAdd(true);
