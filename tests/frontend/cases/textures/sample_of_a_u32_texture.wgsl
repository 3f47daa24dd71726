// expect: type error "textureSampleLevel does not sample"
// tint: refused "no matching call to 'textureSampleLevel(texture_3d<u32>, sampler"
// in: _sampled.wgsl
  let v = textureSampleLevel(ids, s, vec3<f32>(0.5), 0.0);
