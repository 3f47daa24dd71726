// expect: refused "cannot be exactly"
// tint: refused
// in: ../_a_to_out.wgsl
  out[i] = u32(0x1.000001p0f);
