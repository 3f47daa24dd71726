// expect: refused "duplicate target components"
// tint: refused
// in: ../_a_to_out.wgsl
  var v = vec4<u32>();
  v.xx = vec2(1u, 2u);
