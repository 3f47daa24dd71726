// expect: refused "condition is vec2<bool>, expected bool"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  if (vec2<bool>(true, false)) { out[0u] = 1u; }
