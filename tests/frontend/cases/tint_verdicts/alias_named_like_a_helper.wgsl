// expect: type error "redeclaration of 'h'"
// tint: refused "redeclaration of 'h'"
// in: ../_a_to_out.wgsl
alias h = u32;
fn h(x: u32) -> u32 { return x; }
// {body}
  out[i] = h(1u);
