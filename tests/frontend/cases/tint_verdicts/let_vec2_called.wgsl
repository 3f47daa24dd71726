// expect: type error "cannot use 'let vec2' as call target"
// tint: refused "cannot use 'let vec2' as call target"
// in: ../_a_to_out.wgsl
  let vec2 = 1u;
  let w = vec2(4u, 5u);
  out[i] = w.x;
