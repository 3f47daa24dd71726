// expect: refused "'@location(0)' appears multiple times"
// tint: refused "'@location(0)' appears multiple times"
// in: ../_a_to_out.wgsl
struct S { @location(0) a: vec4<f32>, @location(0) b: u32 }
// {body}
  out[i] = a[i];
