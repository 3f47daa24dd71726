// expect: refused "(1u << 32u): a shift by 32: integers have 32 bits (give 0 to 31)"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  out[0u] = 1u << 32u;
