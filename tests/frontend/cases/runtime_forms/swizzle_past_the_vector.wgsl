// expect: refused "no such swizzle"
// tint: refused
// in: ../_a_to_out.wgsl
  var v = vec2<u32>();
  v.xz = vec2(1u, 2u);
