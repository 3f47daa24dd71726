// expect: refused "has no product of mat2x2<f32> and vec4<f32>"
// tint: refused
// in: _kernel.wgsl
  let a = m * v;
