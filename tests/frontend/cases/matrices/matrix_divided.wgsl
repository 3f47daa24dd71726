// expect: refused "m / 2.0f"
// tint: refused
// in: _kernel.wgsl
  let a = m / 2.0;
