// expect: refused "(1.0f / 0.0f): the constant is inf in float32: WGSL refuses a constant that is not finite when it compiles"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  out[0u] = u32(1.0 / 0.0);
