// expect: refused "'@location' value must be non-negative"
// tint: refused "'@location' value must be non-negative"
// in: ../_a_to_out.wgsl
struct S { @location(-1) a: u32 }
// {body}
  out[i] = a[i];
