// expect: taken
// tint: taken
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  _ = gid.x;
  out[0u] = 1u;
