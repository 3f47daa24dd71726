// expect: type error "no matching call to 'textureSampleLevel(texture_2d<f32>, sampler, vec2<f32>)'"
// tint: refused "no matching call to 'textureSampleLevel(texture_2d<f32>, sampler, vec2<f32>)'"
// in: _sampled.wgsl
  let v = textureSampleLevel(img, s, vec2<f32>(0.5));
