// expect: refused "is a let"
// tint: refused
// in: ../_a_to_out.wgsl
  let v = vec2<u32>();
  v.yx = vec2(1u, 2u);
