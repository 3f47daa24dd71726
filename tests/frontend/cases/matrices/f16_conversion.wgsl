// expect: outside "matrix conversion mat2x2<f32> to mat2x2<f16>"
// tint: taken
// in: _kernel.wgsl
  let a = mat2x2<f16>(m);
