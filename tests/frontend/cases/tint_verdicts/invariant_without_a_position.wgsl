// expect: type error "'@invariant' must be applied to a position builtin"
// tint: refused "'@invariant' must be applied to a position builtin"
// in: ../_a_to_out.wgsl
struct S { @invariant a: vec4<f32> }
// {body}
  out[i] = 1u;
