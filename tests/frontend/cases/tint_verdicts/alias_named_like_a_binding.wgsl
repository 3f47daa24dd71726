// expect: type error "redeclaration of 'out'"
// tint: refused "redeclaration of 'out'"
// in: ../_a_to_out.wgsl
alias out = u32;
// {body}
  out[i] = 1u;
