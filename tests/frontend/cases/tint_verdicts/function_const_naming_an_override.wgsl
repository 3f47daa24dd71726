// expect: type error "const initializer requires a const-expression, but expression is an override-expression"
// tint: refused "const initializer requires a const-expression, but expression is an override-expression"
// in: ../_a_to_out.wgsl
override O: u32 = 3u;
// {body}
  const C = O * 2u;
  out[i] = C;
