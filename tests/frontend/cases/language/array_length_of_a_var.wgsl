// expect: refused "'a' is not a storage binding"
// tint: refused
// naga: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  var a: array<u32, 4>;
  out[1u] = arrayLength(&a);
