// expect: type error "no matching call to 'textureGather(i32, texture_depth_2d, sampler, vec2<f32>)'"
// tint: refused "no matching call to 'textureGather(abstract-int, texture_depth_2d, sampler, vec2<f32>)'"
// in: _gather.wgsl
  let g = textureGather(0, d, s, vec2<f32>(0.5));
