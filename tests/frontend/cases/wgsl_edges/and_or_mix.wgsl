// expect: refused "unexpected '|'; expected one of '&' or ';'"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  let a = 1u; let b = 2u; let c = 3u;
  out[0u] = a & b | c;
