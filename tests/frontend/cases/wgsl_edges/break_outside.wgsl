// expect: refused "break outside a loop or switch"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  break;
  out[0u] = 1u;
