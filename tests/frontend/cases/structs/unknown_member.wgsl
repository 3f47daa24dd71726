// expect: refused "B has no field 'e' (d, qs)"
// tint: refused
// in: _kernel.wgsl
  out[0].e = 1.0;
