// expect: refused "a.count"
// tint: refused
// in: _kernel.wgsl
  var a: Out;
  a.count = 1.5;
