// expect: type error "const initializer requires a const-expression, but expression is an override-expression"
// tint: refused "const initializer requires a const-expression, but expression is an override-expression"
// in: ../_a_to_out.wgsl
override O: u32 = 3u;
const C = O + 1u;
// {body}
  out[i] = C;
