// expect: type error "invariant attribute doesn't take parenthesis"
// tint: refused "invariant attribute doesn't take parenthesis"
// in: ../_a_to_out.wgsl
struct S { @builtin(position) @invariant() a: vec4<f32> }
// {body}
  out[i] = 1u;
