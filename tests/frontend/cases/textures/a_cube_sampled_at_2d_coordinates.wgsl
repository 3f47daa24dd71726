// expect: type error "expected vec3<f32>"
// tint: refused "no matching call to 'textureSampleLevel(texture_cube<f32>, sampler, vec2<f32>"
// in: _cube.wgsl
  let v = textureSampleLevel(sky, s, vec2<f32>(0.5), 0.0);
