// expect: refused "mantissa is too large"
// tint: refused
// in: ../_a_to_out.wgsl
  out[i] = u32(0x1.fffffffffffffffffp0);
