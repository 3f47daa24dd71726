// expect: refused "cannot use 'const vec4f' as type"
// tint: refused "cannot use 'const vec4f' as type"
// in: ../_a_to_out.wgsl
const vec4f = 1u;
// {body}
  let q: vec4f = vec4<f32>(1.0);
  out[i] = 1u;
