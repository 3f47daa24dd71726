// expect: refused "has no members"
// tint: refused
// in: _kernel.wgsl
  out[0].d.e = 1.0;
