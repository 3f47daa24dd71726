// expect: taken
// tint: taken
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
const C: u32 = 3u + D;
const D: u32 = 1u;
// {body}
  out[0u] = C;
