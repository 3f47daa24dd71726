// expect: refused "min(1u, 2i): min operands of different types: u32, i32"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  out[0u] = u32(min(1u, 2i));
