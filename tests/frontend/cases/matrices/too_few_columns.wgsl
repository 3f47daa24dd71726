// expect: refused "mat3x2<f32> is built from 3 columns vec2<f32> or 6 f32 values, got (vec2<f32>, vec2<f32>)"
// tint: refused
// in: _kernel.wgsl
  let a = mat3x2<f32>(v.xy, v.zw);
