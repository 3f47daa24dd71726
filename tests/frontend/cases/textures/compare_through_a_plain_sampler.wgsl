// expect: type error "is not a sampler_comparison"
// tint: refused "no matching call to 'textureSampleCompareLevel(texture_depth_2d, sampler, vec2<f32>"
// in: _depth.wgsl
  let v = textureSampleCompareLevel(d, s, vec2<f32>(0.5), 0.5);
