// expect: refused "incremented"
// tint: refused
// in: ../_a_to_out.wgsl
  var v = vec4<u32>();
  v.xy++;
