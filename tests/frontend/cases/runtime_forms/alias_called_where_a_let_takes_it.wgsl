// expect: refused "'vec4f' is a let here, not the type: it cannot be called"
// tint: refused
// in: ../_a_to_out.wgsl
  let vec4f = 1u;
  let q = vec4f(1.0);
