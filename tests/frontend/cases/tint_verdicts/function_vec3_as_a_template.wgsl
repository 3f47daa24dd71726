// expect: type error "function 'vec3' does not take template arguments"
// tint: refused "function 'vec3' does not take template arguments"
// in: ../_a_to_out.wgsl
fn vec3(x: u32) -> u32 { return x * 3u; }
// {body}
  out[i] = vec3(2u);
