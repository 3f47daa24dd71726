// expect: refused "unexpected ';'; expected '='"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  let x: u32;
  out[0u] = 1u;
