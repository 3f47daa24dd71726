// expect: refused "x.x: u32 has no members"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  let x = 1u;
  out[0u] = x.x;
