// expect: refused "literal 2147483648 is not a valid i32 value"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  let x: i32 = 2147483648;
  out[0u] = u32(x);
