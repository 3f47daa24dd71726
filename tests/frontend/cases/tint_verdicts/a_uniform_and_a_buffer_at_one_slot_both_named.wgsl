// expect: type error "references multiple variables that use the same resource binding"
// tint: refused "references multiple variables that use the same resource binding"
// in: ../_a_to_out.wgsl
@group(0) @binding(0) var<uniform> u: u32;
// {body}
  out[i] = a[i] + u;
