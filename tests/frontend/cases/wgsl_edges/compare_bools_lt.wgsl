// expect: refused "(true < false): < expects numeric operands, got bool"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  out[0u] = select(0u, 1u, true < false);
