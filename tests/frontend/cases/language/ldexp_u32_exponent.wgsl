// expect: refused "exponent must be i32"
// tint: refused
// naga: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  let f = ldexp(1.0, 2u);
