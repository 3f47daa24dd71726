// expect: refused "unexpected '||'; expected one of '&&', ')' or ','"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  let a = true;
  out[0u] = select(0u, 1u, a && a || a);
