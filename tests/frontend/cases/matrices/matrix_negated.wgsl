// expect: refused "-m"
// tint: refused
// in: _kernel.wgsl
  let a = -m;
