// expect: refused "m[2i]"
// tint: refused
// in: _kernel.wgsl
  let a = m[2];
