// expect: refused "Out has no field 'size'"
// tint: refused
// in: _kernel.wgsl
  var a: Out;
  a.size = 1u;
