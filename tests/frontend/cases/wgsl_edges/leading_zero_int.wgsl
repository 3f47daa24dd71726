// expect: refused "leading zeros are not allowed in a WGSL literal"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  out[0u] = 012u;
