// expect: refused "Out(...) takes 2 arguments (total, count)"
// tint: refused
// in: _kernel.wgsl
  let a = Out(1.0);
