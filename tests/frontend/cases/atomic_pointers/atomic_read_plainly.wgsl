// expect: refused "cannot bind a value of type atomic<u32>"
// tint: refused
// in: _kernel.wgsl
  let p = &counts[1];
  let x = *p;
