// expect: taken
// tint: taken
// in: _kernel.wgsl
  const_assert determinant(mat2x2<f32>(2.0, 0.0, 0.0, 2.0)) == 4.0;
  const_assert 6.0 == (mat2x2(1.0, 2.0, 3.0, 4.0) * vec2<f32>(1.0, 1.0)).y;
  const_assert 7.0 == (vec2<f32>(1.0, 1.0) * mat2x2<f32>(1.0, 2.0, 3.0, 4.0)).y;
  const_assert transpose(mat2x3(1.0, 2.0, 3.0, 4.0, 5.0, 6.0))[2][1] == 6.0;
