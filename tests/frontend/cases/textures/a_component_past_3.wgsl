// expect: type error "the component argument must be at least 0 and at most 3. component is 4"
// tint: refused "the component argument must be at least 0 and at most 3. component is 4"
// in: _gather.wgsl
  let g = textureGather(4, img, s, vec2<f32>(0.5));
