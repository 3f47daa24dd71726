// expect: outside "const A of type array<u32, 2> (scalar consts only)"
// tint: taken
// in: ../_kernel.wgsl
const A = array<u32, 2>(1u, 2u);
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  out[0u] = A[1];
