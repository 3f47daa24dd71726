// expect: refused "the constant is not finite in f32"
// tint: refused
// in: _kernel.wgsl
  let a = mat2x2<f32>(1e38, 1e38, 1e38, 1e38) * 10.0;
