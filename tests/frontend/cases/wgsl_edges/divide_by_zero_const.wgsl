// expect: refused "(1u / 0u): an integer division by the constant 0"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  out[0u] = 1u / 0u;
