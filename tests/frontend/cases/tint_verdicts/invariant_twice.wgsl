// expect: type error "duplicate invariant attribute"
// tint: refused "duplicate invariant attribute"
// in: ../_a_to_out.wgsl
struct S { @builtin(position) @invariant @invariant a: vec4<f32> }
// {body}
  out[i] = 1u;
