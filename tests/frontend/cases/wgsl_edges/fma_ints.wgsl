// expect: refused "fma(1u, 2u, 3u): fma expects float operands, got u32"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  out[0u] = fma(1u, 2u, 3u);
