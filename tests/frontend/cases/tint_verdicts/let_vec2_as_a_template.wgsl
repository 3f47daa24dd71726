// expect: type error "variable 'vec2' does not take template arguments"
// tint: refused "variable 'vec2' does not take template arguments"
// in: ../_a_to_out.wgsl
  let vec2 = 1u;
  let w = vec2<u32>(4u, 5u);
  out[i] = w.x;
