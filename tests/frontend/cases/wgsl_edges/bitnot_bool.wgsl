// expect: refused "~true: ~ expects integer operands, got bool"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  let b = ~true;
  out[0u] = select(0u, 1u, b);
