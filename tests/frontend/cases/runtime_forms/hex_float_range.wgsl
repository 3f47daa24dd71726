// expect: refused "cannot be represented"
// tint: refused
// in: ../_a_to_out.wgsl
  out[i] = bitcast<u32>(0x1p200f);
