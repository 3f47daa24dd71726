// expect: type error "no matching call to 'textureSampleCompareLevel(texture_depth_2d_array"
// tint: refused "no matching call to 'textureSampleCompareLevel(texture_depth_2d_array"
// in: _depth.wgsl
  let v = textureSampleCompareLevel(da, sc, vec2<f32>(0.5), 0.5);
