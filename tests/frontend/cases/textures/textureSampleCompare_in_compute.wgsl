// expect: type error "built-in cannot be used by compute pipeline stage"
// tint: refused "built-in cannot be used by compute pipeline stage"
// in: _depth.wgsl
  let v = textureSampleCompare(d, sc, vec2<f32>(0.5), 0.5);
