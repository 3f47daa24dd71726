// expect: refused "cannot use 'let u32' as call target"
// tint: refused "cannot use 'let u32' as call target"
// in: ../_a_to_out.wgsl
  let u32 = 1u;
  let x = u32(2);
  out[i] = 1u;
