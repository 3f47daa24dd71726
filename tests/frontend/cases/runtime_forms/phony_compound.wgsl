// expect: refused "'_' is assigned only whole"
// tint: refused
// in: ../_a_to_out.wgsl
  _ += 1u;
