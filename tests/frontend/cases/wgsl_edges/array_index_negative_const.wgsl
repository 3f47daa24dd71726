// expect: refused "a[-1i]: the constant index -1 is out of range (give 0 or more)"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  var a: array<u32, 4>;
  out[0u] = a[-1];
