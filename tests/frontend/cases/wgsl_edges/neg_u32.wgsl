// expect: refused "-x: - expects signed numeric operands, got u32"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  let x = 1u;
  out[0u] = -x;
