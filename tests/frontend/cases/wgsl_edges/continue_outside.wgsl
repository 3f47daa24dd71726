// expect: refused "continue outside a loop"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  continue;
  out[0u] = 1u;
