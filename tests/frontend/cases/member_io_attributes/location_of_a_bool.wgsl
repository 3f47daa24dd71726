// expect: refused "cannot apply '@location' to declaration of type 'bool'"
// tint: refused "cannot apply '@location' to declaration of type 'bool'"
// in: ../_a_to_out.wgsl
struct S { @location(0) a: bool }
// {body}
  out[i] = a[i];
