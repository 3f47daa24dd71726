// expect: refused "components do not make"
// tint: refused
// in: ../_a_to_out.wgsl
  let v = vec4(1u, 2i, 3, 4);
