// expect: refused "'a' is a let, not a var"
// tint: refused
// in: _kernel.wgsl
  let a = Out();
  a.count = 1u;
