// expect: refused "the assertion is false"
// tint: refused
// in: _kernel.wgsl
  const_assert determinant(mat2x2<f32>(2.0, 0.0, 0.0, 2.0)) == 5.0;
