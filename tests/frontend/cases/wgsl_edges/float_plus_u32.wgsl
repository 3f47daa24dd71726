// expect: refused "(1.5f + 1u): + operands of different types: f32, u32"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  out[0u] = u32(1.5 + 1u);
