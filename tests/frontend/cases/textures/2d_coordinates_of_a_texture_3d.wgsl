// expect: type error "expected vec3<f32>"
// tint: refused "no matching call to 'textureSampleLevel(texture_3d<f32>, sampler, vec2<f32>"
// in: _sampled.wgsl
  let v = textureSampleLevel(vol, s, vec2<f32>(0.5), 0.0);
