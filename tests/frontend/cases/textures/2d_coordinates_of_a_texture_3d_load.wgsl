// expect: type error "expected vec3<i32> or vec3<u32>"
// tint: refused "no matching call to 'textureLoad(texture_3d<f32>, vec2<u32>"
// in: _sampled.wgsl
  let v = textureLoad(vol, vec2<u32>(0u), 0);
