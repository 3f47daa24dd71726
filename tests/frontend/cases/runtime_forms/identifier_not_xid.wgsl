// expect: refused "unexpected character '²'"
// tint: refused
// in: ../_a_to_out.wgsl
  let x² = 1u;
  out[i] = x²;
