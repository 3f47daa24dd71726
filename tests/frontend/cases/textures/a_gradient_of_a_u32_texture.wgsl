// expect: type error "which textureSampleGrad does not sample"
// tint: refused "no matching call to 'textureSampleGrad(texture_2d_array<u32>, sampler, vec2<f32>"
// in: _gather.wgsl
  let g = textureSampleGrad(ids, s, vec2<f32>(0.5), 1, vec2<f32>(), vec2<f32>());
