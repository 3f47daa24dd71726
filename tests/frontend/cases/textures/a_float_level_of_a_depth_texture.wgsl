// expect: type error "the level is f32, expected i32 or u32"
// tint: refused "no matching call to 'textureSampleLevel(texture_depth_2d, sampler, vec2<f32>"
// in: _depth.wgsl
  let v = textureSampleLevel(d, s, vec2<f32>(0.5), 0.0);
