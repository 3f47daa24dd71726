// expect: type error "no matching call to 'textureSampleLevel(texture_cube_array<f32>, sampler, vec3<f32>"
// tint: refused "no matching call to 'textureSampleLevel(texture_cube_array<f32>, sampler, vec3<f32>"
// in: _cube.wgsl
  let v = textureSampleLevel(skies, s, vec3<f32>(0.5), 0.0);
