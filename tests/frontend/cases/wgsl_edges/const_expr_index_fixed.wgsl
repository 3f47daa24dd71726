// expect: taken
// tint: taken
// naga: taken
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  const a = array<u32, 2>(1u, 2u);
  out[0u] = a[1];
