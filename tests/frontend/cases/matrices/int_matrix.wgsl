// expect: type error "a matrix's elements are f32 or f16"
// tint: refused
// in: _kernel.wgsl
  let a = mat2x2<i32>(1, 2, 3, 4);
