// expect: refused "-0u: - expects signed numeric operands, got u32"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  out[0u] = -(0u);
