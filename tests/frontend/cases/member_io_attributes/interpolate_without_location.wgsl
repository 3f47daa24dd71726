// expect: refused "'@interpolate' can only be used with '@location'"
// tint: refused "'@interpolate' can only be used with '@location'"
// in: ../_a_to_out.wgsl
struct S { @interpolate(flat) a: u32 }
// {body}
  out[i] = a[i];
