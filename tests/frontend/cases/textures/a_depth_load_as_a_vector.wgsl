// expect: type error "vec4<f32>"
// tint: refused "cannot initialize 'let' of type 'vec4<f32>' with value of type 'f32'"
// in: _depth.wgsl
  let v: vec4<f32> = textureLoad(d, vec2<i32>(0), 0);
