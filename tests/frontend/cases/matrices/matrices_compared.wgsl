// expect: refused "m == m"
// tint: refused
// in: _kernel.wgsl
  let a = m == m;
