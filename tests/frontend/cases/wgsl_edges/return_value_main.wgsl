// expect: refused "return of u32, expected nothing"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  out[0u] = 1u;
  return 1u;
