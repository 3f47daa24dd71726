// expect: refused "inverseSqrt(4i): inverseSqrt expects float operands, got i32"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  out[0u] = u32(inverseSqrt(4i));
