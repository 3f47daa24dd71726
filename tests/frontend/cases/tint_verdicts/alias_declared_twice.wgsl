// expect: type error "redeclaration of 'A'"
// tint: refused "redeclaration of 'A'"
// in: ../_a_to_out.wgsl
alias A = u32;
alias A = i32;
// {body}
  out[i] = 1u;
