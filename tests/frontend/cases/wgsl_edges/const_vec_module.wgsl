// expect: taken
// tint: taken
// naga: taken
// in: ../_kernel.wgsl
const V = vec2<u32>(1u, 2u);
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  out[0u] = V.y;
