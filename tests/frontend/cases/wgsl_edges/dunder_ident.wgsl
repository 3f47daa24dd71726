// expect: refused "let __x = 1u: name '__x' starts with __, which WGSL reserves"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  let __x = 1u;
  out[0u] = __x;
