// expect: refused "adds or subtracts matrices of one type, got mat2x2<f16> and mat2x2<f32>"
// tint: refused
// in: _kernel.wgsl
  let a = mat2x2<f16>() + m;
