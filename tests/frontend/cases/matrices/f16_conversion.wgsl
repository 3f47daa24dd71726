// expect: taken
// tint: taken
// naga: taken
// in: _kernel.wgsl
  let a = mat2x2<f16>(m);
