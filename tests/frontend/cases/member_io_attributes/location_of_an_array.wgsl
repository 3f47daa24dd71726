// expect: refused "cannot apply '@location' to declaration of type 'array<u32, 2>'"
// tint: refused "cannot apply '@location' to declaration of type 'array<u32, 2>'"
// in: ../_a_to_out.wgsl
struct S { @location(0) a: array<u32, 2> }
// {body}
  out[i] = a[i];
