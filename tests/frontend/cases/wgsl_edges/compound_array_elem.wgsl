// expect: taken
// tint: taken
// naga: taken
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  var a: array<u32, 2>;
  a[0] += 3u;
  out[0u] = a[0];
