// expect: refused "unexpected '<<'; expected one of ';' or an operator"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  let a = 1u;
  out[0u] = a + 1u << 2u;
