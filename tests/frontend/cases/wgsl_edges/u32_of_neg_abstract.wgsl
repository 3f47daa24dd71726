// expect: refused "literal -1 is not a valid u32 value"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  out[0u] = u32(-1);
