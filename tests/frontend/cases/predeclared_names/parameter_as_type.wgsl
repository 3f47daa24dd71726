// expect: refused "cannot use parameter 'u32' as type"
// tint: refused "cannot use parameter 'u32' as type"
// in: ../_a_to_out.wgsl
fn h(u32: u32) -> u32 { let z: u32 = u32; return z; }
// {body}
  out[i] = 1u;
