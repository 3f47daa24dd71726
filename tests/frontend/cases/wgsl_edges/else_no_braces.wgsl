// expect: refused "unexpected 'out'; expected one of 'if' or '{'"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  if (gid.x > 0u) { out[0u] = 1u; } else out[0u] = 2u;
