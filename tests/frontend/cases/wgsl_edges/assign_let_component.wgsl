// expect: refused "v.x = 2u: 'v' is a let, not a var"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  let v = vec2<u32>(1u);
  v.x = 2u;
  out[0u] = v.x;
