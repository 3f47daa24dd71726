// expect: refused "cannot use 'var g' as call target"
// tint: refused "cannot use 'var g' as call target"
// in: ../_a_to_out.wgsl
fn g(x: u32) -> u32 { return x; }
// {body}
  var g = 1u;
  let x = g(2u);
  out[i] = 1u;
