// expect: type error "no matching call to 'textureSampleLevel(texture_2d<f32>, texture_2d<f32>"
// tint: refused "no matching call to 'textureSampleLevel(texture_2d<f32>, texture_2d<f32>"
// in: _sampled.wgsl
  let v = textureSampleLevel(img, img, vec2<f32>(0.5), 0.0);
