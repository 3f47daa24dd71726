// expect: refused "cannot use 'let vec4f' as type"
// tint: refused "cannot use 'let vec4f' as type"
// in: ../_a_to_out.wgsl
  {
    let vec4f = 1u;
    let q: vec4f = vec4<f32>(1.0);
  }
  out[i] = 1u;
