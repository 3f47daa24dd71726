// expect: refused "f16 is used without 'enable f16;'"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  out[0u] = u32(1.0h);
