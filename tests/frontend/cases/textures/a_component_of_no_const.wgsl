// expect: type error "the 'component' argument of 'textureGather' must be a const-expression"
// tint: refused "the 'component' argument of 'textureGather' must be a const-expression"
// in: _gather.wgsl
  let c = i32(i % 4u);
  let g = textureGather(c, img, s, vec2<f32>(0.5));
