// expect: refused "takes a matrix, got vec4<f32>"
// tint: refused
// in: _kernel.wgsl
  let a = transpose(v);
