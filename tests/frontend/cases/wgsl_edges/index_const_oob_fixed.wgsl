// expect: refused "a[4i]: the constant index 4 is out of range (give 0 to 3)"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  var a: array<u32, 4>;
  out[0u] = a[4];
