// expect: refused "i += 1u: 'i' is a let, not a var"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  for (let i = 0u; i < 2u; i++) { }
  out[0u] = 1u;
