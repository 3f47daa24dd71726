// expect: refused "(5u / 2.0f): / operands of different types: u32, f32"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  out[0u] = 5u / 2.0f;
