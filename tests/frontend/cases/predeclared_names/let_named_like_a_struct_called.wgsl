// expect: refused "cannot use 'let S' as call target"
// tint: refused "cannot use 'let S' as call target"
// in: ../_a_to_out.wgsl
struct S { a: u32 }
// {body}
  let S = 1u;
  let s = S(2u);
  out[i] = 1u;
