// expect: refused "duplicate location attribute"
// tint: refused "duplicate location attribute"
// in: ../_a_to_out.wgsl
struct S { @location(0) @location(1) a: u32 }
// {body}
  out[i] = a[i];
