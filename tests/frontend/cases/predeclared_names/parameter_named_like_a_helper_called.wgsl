// expect: refused "cannot use parameter 'g' as call target"
// tint: refused "cannot use parameter 'g' as call target"
// in: ../_a_to_out.wgsl
fn g(x: u32) -> u32 { return x; }
fn h(g: u32) -> u32 { return g(g); }
// {body}
  out[i] = 1u;
