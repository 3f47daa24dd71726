// expect: refused "x += 1u: 'x' is a let, not a var"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  let x = 1u;
  x += 1u;
  out[0u] = x;
