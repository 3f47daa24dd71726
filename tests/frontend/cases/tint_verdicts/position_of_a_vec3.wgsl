// expect: type error "store type of '@builtin(position)' must be 'vec4<f32>'"
// tint: refused "store type of '@builtin(position)' must be 'vec4<f32>'"
// in: ../_a_to_out.wgsl
struct S { @builtin(position) @invariant a: vec3<f32> }
// {body}
  out[i] = 1u;
