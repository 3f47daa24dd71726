// expect: taken
// tint: taken
// naga: taken
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  let a = array<u32, 4>(1u, 2u, 3u, 4u);
  out[0u] = a[gid.x % 4u];
