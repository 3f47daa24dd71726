// expect: refused "the constant is not finite in f32"
// tint: refused
// in: _kernel.wgsl
  let a = determinant(mat2x2<f32>(1e30, 1e30, -1e30, 1e30));
