// expect: refused "cannot assign a u32 to the swizzle"
// tint: refused
// in: ../_a_to_out.wgsl
  var v = vec4<u32>();
  v.xy = 3u;
