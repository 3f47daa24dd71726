// expect: refused "params.n = 1u: 'params' is a params, not a var"
// tint: refused
// in: ../_kernel.wgsl
struct P { n: u32, }
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<uniform> params: P;
// {body}
  params.n = 1u;
