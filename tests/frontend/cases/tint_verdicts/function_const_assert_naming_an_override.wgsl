// expect: type error "const assertion requires a const-expression, but expression is an override-expression"
// tint: refused "const assertion requires a const-expression, but expression is an override-expression"
// in: ../_a_to_out.wgsl
override O: u32 = 3u;
// {body}
  const_assert O > 1u;
  out[i] = O;
