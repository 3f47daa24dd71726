// expect: refused "has no product of mat2x2<f32> and mat2x3<f32>"
// tint: refused
// in: _kernel.wgsl
  let a = m * mat2x3<f32>(v.xyz, v.yzw);
