// expect: taken
// tint: taken
// naga: taken
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  let a = 1.;
  let b = .5;
  let c = 1e3;
  out[0u] = u32(a + b + c);
