// expect: refused "undefined name 'i'"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  for (var i = 0u; i < 2u; i++) { }
  out[0u] = i;
