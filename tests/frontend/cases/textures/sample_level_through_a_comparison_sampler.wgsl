// expect: type error "is not a sampler"
// tint: refused "no matching call to 'textureSampleLevel(texture_depth_2d, sampler_comparison"
// in: _depth.wgsl
  let v = textureSampleLevel(d, sc, vec2<f32>(0.5), 0);
