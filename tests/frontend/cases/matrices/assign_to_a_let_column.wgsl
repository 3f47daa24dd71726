// expect: refused "m"
// tint: refused
// in: _kernel.wgsl
  m[0] = v.xy;
