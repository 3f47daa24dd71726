// expect: refused "expects a bool, got u32"
// tint: refused
// naga: refused
// in: _kernel.wgsl
  let b = subgroupBallot(1u);
