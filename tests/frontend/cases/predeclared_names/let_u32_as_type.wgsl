// expect: refused "cannot use 'let u32' as type"
// tint: refused "cannot use 'let u32' as type"
// in: ../_a_to_out.wgsl
  let u32 = 1u;
  var x: u32 = u32;
  out[i] = 1u;
