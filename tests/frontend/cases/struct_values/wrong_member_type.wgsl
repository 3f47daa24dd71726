// expect: refused "Out takes (f32, u32), got (f32, f32)"
// tint: refused
// in: _kernel.wgsl
  let a = Out(1.0, 2.0);
