// expect: refused "x[0i]: cannot index a value of type u32"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  let x = 1u;
  out[0u] = x[0];
