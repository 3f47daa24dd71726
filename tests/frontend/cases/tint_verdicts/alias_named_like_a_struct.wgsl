// expect: type error "redeclaration of 'S'"
// tint: refused "redeclaration of 'S'"
// in: ../_a_to_out.wgsl
struct S { a: u32 }
alias S = u32;
// {body}
  out[i] = 1u;
