// expect: taken
// tint: taken
// naga: taken
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  if (gid.x == 0u) { out[0u] = 1u; } else if (gid.x == 1u) { out[0u] = 2u; } else { out[0u] = 3u; }
