// expect: refused "takes a square matrix, got mat3x2<f32>"
// tint: refused
// in: _kernel.wgsl
  let a = determinant(mat3x2<f32>(v.xy, v.zw, v.xy));
