// expect: type error "type 'array' does not take template arguments"
// tint: refused "type 'array' does not take template arguments"
// in: ../_a_to_out.wgsl
alias array = u32;
// {body}
  out[i] = 1u;
