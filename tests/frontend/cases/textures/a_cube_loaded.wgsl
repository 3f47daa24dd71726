// expect: type error "no matching call to 'textureLoad(texture_cube<f32>"
// tint: refused "no matching call to 'textureLoad(texture_cube<f32>"
// in: _cube.wgsl
  let v = textureLoad(sky, vec2<u32>(0u), 0);
